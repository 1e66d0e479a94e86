package admin

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxNameLen bounds key names, model names and similar identifiers.
const maxNameLen = 200

// checkName checks an identifier-like value (model, deployment or
// credential name): non-empty, at most maxNameLen characters, valid UTF-8
// and without whitespace or control characters. what names it in messages.
func checkName(what, v string) error {
	if v == "" {
		return invalid("%s is required", what)
	}
	if err := checkText(what, v); err != nil {
		return err
	}
	if i := strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		return invalid("%s %q must not contain whitespace", what, v)
	}
	return nil
}

// checkText checks free text: valid UTF-8 and at most maxNameLen characters.
func checkText(what, v string) error {
	if !utf8.ValidString(v) {
		return invalid("%s is not valid UTF-8", what)
	}
	if n := utf8.RuneCountInString(v); n > maxNameLen {
		return invalid("%s is %d characters long; the limit is %d", what, n, maxNameLen)
	}
	return nil
}

// checkModelPatterns checks a key's model allow-list.
func checkModelPatterns(models []string) error {
	for i, m := range models {
		if m == "" {
			return invalid("model pattern %d is empty; give a model name or a pattern such as gpt-*", i+1)
		}
		if err := checkName("model pattern", m); err != nil {
			return err
		}
	}
	return nil
}

// checkMetadata checks key labels. allowEmptyValue is set for updates,
// where an empty value deletes the label.
func checkMetadata(md map[string]string, allowEmptyValue bool) error {
	for k, v := range md {
		if err := checkName("metadata key", k); err != nil {
			return err
		}
		if v == "" && !allowEmptyValue {
			return invalid("metadata %q has an empty value", k)
		}
		if err := checkText("metadata value of "+k, v); err != nil {
			return err
		}
	}
	return nil
}
