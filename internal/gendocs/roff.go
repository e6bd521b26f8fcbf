package main

import (
	"regexp"
	"strings"
)

// esc makes text safe in a roff text line: a backslash prints as itself,
// '-' is a real hyphen-minus (so --ttl can be searched for and pasted),
// and a line cannot start a request.
func esc(text string) string {
	text = strings.ReplaceAll(text, `\`, `\e`)
	text = strings.ReplaceAll(text, "-", `\-`)
	if strings.HasPrefix(text, ".") || strings.HasPrefix(text, "'") {
		text = `\&` + text
	}
	return text
}

// bold is text in bold, escaped.
func bold(text string) string { return `\fB` + esc(text) + `\fR` }

// block is a part of a description: the lines under a LABEL: heading, or
// the text before the first one (Label "").
type block struct {
	Label string
	Lines []string
}

var label = regexp.MustCompile(`^[A-Z][A-Z ]*[A-Z]:$`)

// blocks splits a urfave/cli description into its labelled parts, as
// `lockrun run --help` shows them ("EXAMPLES:", "EXIT STATUS:").
func blocks(desc string) []block {
	out := []block{{}}
	for _, line := range strings.Split(desc, "\n") {
		if label.MatchString(line) {
			out = append(out, block{Label: strings.TrimSuffix(line, ":")})
			continue
		}
		b := &out[len(out)-1]
		b.Lines = append(b.Lines, strings.TrimPrefix(line, "   "))
	}
	return out
}

// prose renders lines as roff: blank lines end paragraphs, indented lines
// (commands, tables) keep their layout, the rest is filled.
func prose(lines []string) string {
	var sb strings.Builder
	verbatim := false
	for _, l := range trimBlank(lines) {
		indented := strings.HasPrefix(l, " ") || strings.HasPrefix(l, "#") || strings.Contains(strings.TrimSpace(l), "   ")
		switch {
		case strings.TrimSpace(l) == "":
			if verbatim {
				sb.WriteString(".fi\n.RE\n")
				verbatim = false
			}
			sb.WriteString(".PP\n")
			continue
		case indented && !verbatim:
			sb.WriteString(".RS 4\n.nf\n")
			verbatim = true
		case !indented && verbatim:
			sb.WriteString(".fi\n.RE\n")
			verbatim = false
		}
		sb.WriteString(esc(strings.TrimRight(l, " ")) + "\n")
	}
	if verbatim {
		sb.WriteString(".fi\n.RE\n")
	}
	return sb.String()
}

func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// verbatim renders lines unfilled and indented, blank lines kept.
func verbatim(lines []string) string {
	var sb strings.Builder
	sb.WriteString(".RS 4\n.nf\n")
	for _, l := range trimBlank(lines) {
		sb.WriteString(esc(strings.TrimRight(l, " ")) + "\n")
	}
	sb.WriteString(".fi\n.RE\n")
	return sb.String()
}
