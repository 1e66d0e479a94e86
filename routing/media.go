package routing

// mediaTypes are the "type" values of the content parts that carry an
// image or audio, in the OpenAI chat, Responses and Anthropic formats.
var mediaTypes = map[string]bool{
	"image_url": true, "input_image": true, "image": true,
	"input_audio": true, "audio": true,
}

// CountMedia counts the image and audio parts anywhere in a valid JSON
// body: the objects whose "type" is one of mediaTypes. Their tokens are
// not bounded by their bytes (a small PNG, or a URL, may cost thousands),
// so a budget reservation adds an allowance for each.
func CountMedia(body []byte) int {
	n := 0
	countMedia(body, skipWS(body, 0), &n, 0)
	return n
}

// countMedia walks the value at i (depth-limited: validJSON already bounds
// nesting, this keeps the walk's stack small whatever it allows).
func countMedia(b []byte, i int, n *int, depth int) {
	if i >= len(b) || depth > 64 {
		return
	}
	switch b[i] {
	case '{':
		end := skipValue(b, i)
		_ = eachMember(b[i:end], func(name []byte, v Span) error {
			val := b[i+v.Start : i+v.End]
			if string(name) == "type" {
				if s, ok := decodeString(val); ok && mediaTypes[s] {
					*n++
				}
				return nil
			}
			if val[0] == '{' || val[0] == '[' {
				countMedia(b, i+v.Start, n, depth+1)
			}
			return nil
		})
	case '[':
		end := skipValue(b, i)
		j := skipWS(b, i+1)
		for j < end-1 {
			countMedia(b, j, n, depth+1)
			j = skipWS(b, skipValue(b, j))
			if j >= end || b[j] != ',' {
				break
			}
			j = skipWS(b, j+1)
		}
	}
}
