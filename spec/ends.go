package spec

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/toolgen/toolgen/spec/diag"
)

// fillEnds gives each finding that starts at a one-line YAML scalar — a key or a value,
// which is where almost every check points — the end of that scalar, so an editor or a
// snippet can underline the span (buf's FileAnnotation carries the same). sources holds
// each file's text by its displayed path. A finding elsewhere (inside a CEL
// expression, at a mapping, in a file not at hand) keeps a zero End.
func fillEnds(diags Diagnostics, sources map[string][]byte) {
	ends := map[string]map[Pos]Pos{}
	for i := range diags {
		d := &diags[i]
		if d.End != (diag.Pos{}) || d.Pos.Line == 0 {
			continue
		}
		idx, ok := ends[d.Path]
		if !ok {
			if src, found := sources[d.Path]; found {
				idx = scalarEnds(src)
			}
			ends[d.Path] = idx
		}
		if end, ok := idx[Pos(d.Pos)]; ok {
			d.End = diag.Pos(end)
		}
	}
}

// scalarEnds maps the start of every one-line scalar of the YAML text src to the
// position just past it. A text that does not parse maps nothing.
func scalarEnds(src []byte) map[Pos]Pos {
	var root yaml.Node
	if yaml.Unmarshal(src, &root) != nil {
		return nil
	}
	lines := strings.Split(string(src), "\n")
	out := map[Pos]Pos{}
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if n == nil || depth > maxNodeDepth {
			return
		}
		if n.Kind == yaml.ScalarNode && n.Line >= 1 && n.Line <= len(lines) && n.Column >= 1 {
			line := []rune(strings.TrimSuffix(lines[n.Line-1], "\r"))
			if w := scalarWidth(n, line[min(n.Column-1, len(line)):]); w > 0 {
				out[Pos{n.Line, n.Column}] = Pos{n.Line, n.Column + w}
			}
		}
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(&root, 0)
	return out
}

// maxNodeDepth bounds the walk over a hostile document's nesting.
const maxNodeDepth = 10000

// scalarWidth is how many runes of text, which starts at scalar n, n spans on its
// line; 0 when it does not end there (a block scalar, a multi-line one, a tag or
// anchor first) or the text is not what n says.
func scalarWidth(n *yaml.Node, text []rune) int {
	style := n.Style &^ yaml.FlowStyle
	switch style {
	case yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle:
		q := '"'
		if style == yaml.SingleQuotedStyle {
			q = '\''
		}
		if len(text) == 0 || text[0] != q {
			return 0
		}
		for i := 1; i < len(text); i++ {
			switch {
			case q == '"' && text[i] == '\\':
				i++ // the escaped rune
			case q == '\'' && text[i] == '\'' && i+1 < len(text) && text[i+1] == '\'':
				i++ // '' stands for '
			case text[i] == q:
				return i + 1
			}
		}
		return 0
	case 0:
		v := []rune(n.Value)
		if len(v) == 0 || len(v) > len(text) || string(text[:len(v)]) != n.Value {
			return 0
		}
		return len(v)
	}
	return 0
}
