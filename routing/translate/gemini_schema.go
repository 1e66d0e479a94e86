package translate

// JSON Schema → Gemini Schema.
//
// Gemini's Schema is a subset of OpenAPI 3.0 and the API answers 400 to any
// key outside it. geminiSchema rewrites a JSON Schema by this rule:
//
//   - kept: type, format, description, nullable, enum, items, properties,
//     required, anyOf, propertyOrdering, minItems, maxItems, minProperties,
//     maxProperties, minLength, maxLength, pattern, minimum, maximum;
//   - rewritten: local $ref (#/$defs/..., #/definitions/...) is inlined;
//     allOf is merged into one schema; oneOf becomes anyOf; const becomes a
//     one-value enum; a type list ["x", "null"] becomes type x with
//     nullable true (several non-null types become anyOf);
//   - dropped: every other key, notably additionalProperties, $schema, $id,
//     $defs, strict, examples, not, patternProperties,
//     exclusiveMinimum/Maximum, and title, default and example (declared
//     by Gemini's Schema but refused by some of its backends; they only
//     annotate); a format Gemini does not know for the type (it knows enum
//     and date-time for strings, int32/int64, float/double); an enum with
//     non-string values (Gemini enums are strings); an empty properties map
//     (Gemini refuses one: a free-form object stays {"type":"object"}, and
//     a function whose parameters have no properties is sent without
//     parameters); required names that are not properties.
//
// A recursive $ref cannot be inlined and is refused.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

var geminiSchemaKeep = map[string]bool{
	"description": true, "nullable": true, "pattern": true,
	"minItems": true, "maxItems": true, "minProperties": true, "maxProperties": true,
	"minLength": true, "maxLength": true, "minimum": true, "maximum": true,
}

var geminiFormats = map[string]map[string]bool{
	"string":  {"enum": true, "date-time": true},
	"integer": {"int32": true, "int64": true},
	"number":  {"float": true, "double": true},
}

const geminiSchemaMaxDepth = 64

// geminiSchema converts a JSON Schema document; an absent schema is nil.
func geminiSchema(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, err
	}
	rootMap, ok := root.(map[string]any)
	if !ok {
		return nil, errors.New("a schema must be a JSON object")
	}
	c := geminiSchemaConv{root: rootMap}
	out, err := c.node(rootMap, 0)
	if err != nil {
		return nil, err
	}
	// Function parameters are an object: some clients leave the root's
	// type out, which Gemini refuses.
	if _, ok := out["properties"]; ok && out["type"] == nil && out["anyOf"] == nil {
		out["type"] = "object"
	}
	return out, nil
}

type geminiSchemaConv struct{ root map[string]any }

func (c *geminiSchemaConv) node(v any, depth int) (map[string]any, error) {
	if depth > geminiSchemaMaxDepth {
		return nil, errors.New("the schema nests too deeply or refers to itself")
	}
	switch s := v.(type) {
	case bool:
		// true accepts anything: an unconstrained schema.
		if s {
			return map[string]any{}, nil
		}
		return nil, errors.New("a false schema cannot be expressed")
	case map[string]any:
		return c.object(s, depth)
	default:
		return nil, errors.New("a schema must be a JSON object")
	}
}

func (c *geminiSchemaConv) object(s map[string]any, depth int) (map[string]any, error) {
	s, err := c.flatten(s, depth)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for k, v := range s {
		if geminiSchemaKeep[k] {
			out[k] = v
		}
	}
	typ, err := geminiSchemaType(s, out)
	if err != nil {
		return nil, err
	}
	if f, ok := s["format"].(string); ok && geminiFormats[typ][f] {
		out["format"] = f
	}
	if e, ok := s["enum"].([]any); ok {
		if vals, ok := geminiStrings(e); ok && len(vals) > 0 {
			out["enum"] = vals
		}
	} else if cv, ok := s["const"].(string); ok {
		out["enum"] = []string{cv}
	}
	if err := c.properties(s, out, depth); err != nil {
		return nil, err
	}
	if items, ok := s["items"]; ok {
		if _, tuple := items.([]any); !tuple {
			is, err := c.node(items, depth+1)
			if err != nil {
				return nil, fmt.Errorf("items: %w", err)
			}
			out["items"] = is
		}
	}
	if err := c.alternatives(s, out, depth); err != nil {
		return nil, err
	}
	geminiMoveIntoAlternatives(out)
	return out, nil
}

// properties converts an object's properties, keeping the required names
// and the ordering of the properties it has.
func (c *geminiSchemaConv) properties(s, out map[string]any, depth int) error {
	props, ok := s["properties"].(map[string]any)
	if !ok || len(props) == 0 {
		return nil
	}
	conv := make(map[string]any, len(props))
	for name, p := range props {
		ps, err := c.node(p, depth+1)
		if err != nil {
			return fmt.Errorf("property %q: %w", name, err)
		}
		conv[name] = ps
	}
	out["properties"] = conv
	if req, ok := s["required"].([]any); ok {
		var names []string
		for _, r := range req {
			if n, ok := r.(string); ok {
				if _, defined := conv[n]; defined {
					names = append(names, n)
				}
			}
		}
		if len(names) > 0 {
			out["required"] = names
		}
	}
	if order, ok := s["propertyOrdering"].([]any); ok {
		if vals, ok := geminiStrings(order); ok {
			out["propertyOrdering"] = vals
		}
	}
	return nil
}

// alternatives converts anyOf (or oneOf): {"type":"null"} alternatives
// become nullable, and a single alternative left is merged into the node.
func (c *geminiSchemaConv) alternatives(s, out map[string]any, depth int) error {
	anyOf, ok := s["anyOf"].([]any)
	if !ok {
		anyOf, _ = s["oneOf"].([]any)
	}
	if len(anyOf) == 0 {
		return nil
	}
	var alts []any
	for i, a := range anyOf {
		as, err := c.node(a, depth+1)
		if err != nil {
			return fmt.Errorf("anyOf[%d]: %w", i, err)
		}
		if len(as) == 1 && as["nullable"] == true {
			out["nullable"] = true
			continue
		}
		alts = append(alts, as)
	}
	switch {
	case len(alts) == 1 && out["type"] == nil:
		for k, v := range alts[0].(map[string]any) {
			if _, set := out[k]; !set {
				out[k] = v
			}
		}
	case len(alts) > 0:
		out["anyOf"] = alts
	}
	return nil
}

// geminiMoveIntoAlternatives handles a node of several types (anyOf from a
// type list) with object or array keywords: Gemini allows those only on a
// node of that type, so they move into the matching alternative.
func geminiMoveIntoAlternatives(out map[string]any) {
	alts, ok := out["anyOf"].([]any)
	if !ok || out["type"] != nil {
		return
	}
	for _, a := range alts {
		am, _ := a.(map[string]any)
		switch t, _ := am["type"].(string); strings.ToLower(t) {
		case "object":
			for _, k := range []string{"properties", "required", "propertyOrdering"} {
				if v, ok := out[k]; ok {
					am[k] = v
				}
			}
		case "array":
			if v, ok := out["items"]; ok {
				am["items"] = v
			}
		}
	}
	for _, k := range []string{"properties", "required", "propertyOrdering", "items"} {
		delete(out, k)
	}
}

// geminiSchemaType writes the Gemini form of s's type into out and returns
// the (lower-case) single type, or "" when there is none.
func geminiSchemaType(s, out map[string]any) (string, error) {
	switch t := s["type"].(type) {
	case string:
		if strings.EqualFold(t, "null") {
			out["nullable"] = true
			return "", nil
		}
		out["type"] = t
		return strings.ToLower(t), nil
	case []any:
		var types []string
		for _, x := range t {
			name, ok := x.(string)
			if !ok {
				return "", errors.New("type must be a string or a list of strings")
			}
			if strings.EqualFold(name, "null") {
				out["nullable"] = true
				continue
			}
			types = append(types, name)
		}
		switch len(types) {
		case 0:
			return "", nil
		case 1:
			out["type"] = types[0]
			return strings.ToLower(types[0]), nil
		}
		alts := make([]any, len(types))
		for i, name := range types {
			alts[i] = map[string]any{"type": name}
		}
		out["anyOf"] = alts
		return "", nil
	}
	return "", nil
}

// flatten inlines a $ref and merges allOf into s.
func (c *geminiSchemaConv) flatten(s map[string]any, depth int) (map[string]any, error) {
	for round := 0; ; round++ {
		if depth+round > geminiSchemaMaxDepth {
			return nil, errors.New("the schema nests too deeply or refers to itself")
		}
		ref, hasRef := s["$ref"].(string)
		all, hasAll := s["allOf"].([]any)
		if !hasRef && !hasAll {
			return s, nil
		}
		merged := map[string]any{}
		for k, v := range s {
			if k != "$ref" && k != "allOf" {
				merged[k] = v
			}
		}
		var parts []any
		if hasRef {
			target, err := c.resolve(ref)
			if err != nil {
				return nil, err
			}
			parts = append(parts, target)
		}
		parts = append(parts, all...)
		for _, p := range parts {
			pm, ok := p.(map[string]any)
			if !ok {
				if p == true {
					continue
				}
				return nil, errors.New("allOf entries must be schemas")
			}
			geminiMergeSchema(merged, pm)
		}
		s = merged
	}
}

// resolve finds a local reference.
func (c *geminiSchemaConv) resolve(ref string) (map[string]any, error) {
	if ref == "#" {
		return c.root, nil
	}
	ptr, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("$ref %q is not a local reference", ref)
	}
	var cur any = c.root
	for _, seg := range strings.Split(ptr, "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
		if cur, ok = m[seg]; !ok {
			return nil, fmt.Errorf("$ref %q does not resolve", ref)
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("$ref %q does not name a schema", ref)
	}
	return m, nil
}

// geminiMergeSchema merges src into dst for allOf: properties and required
// are united, other keys already in dst win.
func geminiMergeSchema(dst, src map[string]any) {
	for k, v := range src {
		switch k {
		case "properties":
			sp, _ := v.(map[string]any)
			dp, _ := dst[k].(map[string]any)
			merged := make(map[string]any, len(dp)+len(sp))
			for n, p := range sp {
				merged[n] = p
			}
			for n, p := range dp {
				merged[n] = p
			}
			dst[k] = merged
		case "required":
			sr, _ := v.([]any)
			dr, _ := dst[k].([]any)
			dst[k] = append(append([]any{}, dr...), sr...)
		default:
			if _, set := dst[k]; !set {
				dst[k] = v
			}
		}
	}
}

// geminiStrings returns vs as strings when every value is one.
func geminiStrings(vs []any) ([]string, bool) {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}
