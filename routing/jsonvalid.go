package routing

import "encoding/binary"

// maxJSONDepth is encoding/json's nesting limit: deeper input is invalid.
const maxJSONDepth = 10000

// validJSON reports whether b is exactly one JSON value, by the rules of
// encoding/json.Valid (which it replaces on the hot path, at several times
// its speed): RFC 8259 grammar, no control characters in strings, nesting
// up to 10,000, bytes that are not UTF-8 allowed in strings.
func validJSON(b []byte) bool {
	var buf [64]byte
	stack := buf[:0] // the open containers, '{' or '['
	i := 0
	for {
		// A value starts here.
		i = skipWS(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '{', '[':
			if len(stack) >= maxJSONDepth {
				return false
			}
			open, closer := b[i], byte('}')
			if open == '[' {
				closer = ']'
			}
			j := skipWS(b, i+1)
			if j < len(b) && b[j] == closer {
				i = j + 1
				break
			}
			stack = append(stack, open)
			i = j
			if open == '{' {
				if i = validKey(b, i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			i = validString(b, i)
		case 't':
			i = validLiteral(b, i, "true")
		case 'f':
			i = validLiteral(b, i, "false")
		case 'n':
			i = validLiteral(b, i, "null")
		default:
			i = validNumber(b, i)
		}
		if i < 0 {
			return false
		}
		// A value ended: close containers until a comma asks for the next.
		for {
			i = skipWS(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			switch c := b[i]; {
			case c == ',':
				i++
				if top == '{' {
					if i = validKey(b, skipWS(b, i)); i < 0 {
						return false
					}
				}
			case c == '}' && top == '{', c == ']' && top == '[':
				stack = stack[:len(stack)-1]
				i++
				continue
			default:
				return false
			}
			break
		}
	}
}

// validKey checks a member name and its colon at i; it returns the index
// after the colon, or -1.
func validKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = validString(b, i); i < 0 {
		return -1
	}
	if i = skipWS(b, i); i >= len(b) || b[i] != ':' {
		return -1
	}
	return i + 1
}

// validString checks the string literal at i (b[i] == '"'); it returns the
// index after it, or -1.
func validString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		if i = skipPlain(b, i); i >= len(b) {
			return -1
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return -1
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// skipPlain returns the index of the first 8-byte word from i on that holds
// a quote, a backslash or a control character (or i when fewer than 8
// bytes remain): a string's plain run is checked a word at a time.
func skipPlain(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, s := x^(ones*'"'), x^(ones*'\\')
		if ((x-ones*0x20)&^x|(q-ones)&^q|(s-ones)&^s)&highs != 0 {
			return i
		}
	}
	return i
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func validLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// validNumber checks the number at i; it returns the index after it, or -1.
func validNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// ValidJSON is validJSON for the proxy's check of whole answers.
func ValidJSON(b []byte) bool { return validJSON(b) }
