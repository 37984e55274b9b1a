package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// This file reads the parameter lists of a PTX module's kernels, so that
// Launch can refuse arguments that do not match them (see Function.Launch).
//
// The parser understands only what it needs: at the top level of the module
// (outside every {} body and initializer) the .version directive and each
// .entry declaration,
//
//	.visible .entry name(
//		.param .u64 name_param_0,
//		.param .align 8 .b8 name_param_1[16],
//		.param .u64 .ptr .global .align 4 name_param_2
//	)
//
// Everything else is skipped token by token. Inside a parameter list it is
// strict: a token it does not expect makes the whole module's table an error,
// and Launch then checks nothing rather than something wrong.

// ptxParamTable maps a kernel's name to the sizes in bytes of its parameters,
// in declaration order.
type ptxParamTable map[string][]int

// errNotPTX reports an image that is not PTX text (no .version directive at
// its top level): a cubin or fatbin, or a test's stand-in.
var errNotPTX = errors.New("cuda: the module image is not PTX text (no .version directive)")

// parsePTXParams returns the parameter table of every .entry the PTX text
// declares. A text without a top-level .version directive returns errNotPTX;
// a malformed parameter list, an unknown parameter type or an unbalanced
// body returns an error naming the line.
func parsePTXParams(ptx []byte) (ptxParamTable, error) {
	table, _, err := parsePTX(ptx)
	return table, err
}

// parsePTX is parsePTXParams that also names the kernels with a
// floating-point parameter (.f16, .f32, .f64), which the CPU emulation
// cannot pass (a C++ function takes them in vector registers).
func parsePTX(ptx []byte) (ptxParamTable, map[string]bool, error) {
	lx := ptxLexer{src: ptx, floats: map[string]bool{}}
	table := ptxParamTable{}
	sawVersion := false
	for {
		tok, err := lx.next()
		if err != nil {
			return nil, nil, err
		}
		switch {
		case tok == nil:
			if !sawVersion {
				return nil, nil, errNotPTX
			}
			return table, lx.floats, nil
		case len(tok) == 1 && tok[0] == '{':
			if err := lx.skipBody(); err != nil {
				return nil, nil, err
			}
		case len(tok) == 1 && tok[0] == '}':
			return nil, nil, lx.errorf("unbalanced '}'")
		case string(tok) == ".version":
			sawVersion = true
		case string(tok) == ".entry":
			name, params, err := lx.entry()
			if err != nil {
				return nil, nil, err
			}
			if prev, ok := table[name]; ok && !slices.Equal(prev, params) {
				return nil, nil, lx.errorf("kernel %s is declared twice with different parameters", name)
			}
			table[name] = params
		}
	}
}

// entry parses what follows an .entry directive: the kernel's name and its
// optional parameter list.
func (lx *ptxLexer) entry() (string, []int, error) {
	tok, err := lx.next()
	if err != nil {
		return "", nil, err
	}
	if !isPTXIdent(tok) {
		return "", nil, lx.errorf(".entry followed by %q, not a name", tok)
	}
	name := string(tok)
	params := []int{}
	if !lx.peekIs('(') {
		return name, params, nil // a kernel without parameters may omit the list
	}
	lx.next() // the '('
	if lx.peekIs(')') {
		lx.next()
		return name, params, nil
	}
	for {
		size, err := lx.param(name)
		if err != nil {
			return "", nil, err
		}
		params = append(params, size)
		tok, err := lx.next()
		if err != nil {
			return "", nil, err
		}
		if len(tok) == 1 && tok[0] == ')' {
			return name, params, nil
		}
		if len(tok) != 1 || tok[0] != ',' {
			return "", nil, lx.errorf("kernel %s: %q after parameter %d, want ',' or ')'", name, tok, len(params)-1)
		}
	}
}

// param parses one ".param [.align N] .type [.ptr [.space] [.align N]] name[N]..."
// and returns its size in bytes.
func (lx *ptxLexer) param(kernel string) (int, error) {
	tok, err := lx.next()
	if err != nil {
		return 0, err
	}
	if string(tok) != ".param" {
		return 0, lx.errorf("kernel %s: parameter starts with %q, want .param", kernel, tok)
	}
	size, ptr := 0, false
	for {
		tok, err = lx.next()
		if err != nil {
			return 0, err
		}
		if len(tok) == 0 || tok[0] != '.' {
			break
		}
		switch d := string(tok); {
		case d == ".align":
			if _, err := lx.number(kernel); err != nil {
				return 0, err
			}
		case d == ".ptr" && size != 0 && !ptr:
			ptr = true
		case ptr && (d == ".global" || d == ".const" || d == ".local" || d == ".shared"):
		case size == 0 && ptxTypeSize[d] != 0:
			size = ptxTypeSize[d]
			if lx.floats != nil && (d == ".f16" || d == ".f32" || d == ".f64") {
				lx.floats[kernel] = true
			}
		default:
			return 0, lx.errorf("kernel %s: unexpected %q in a parameter declaration", kernel, tok)
		}
	}
	if size == 0 {
		return 0, lx.errorf("kernel %s: parameter %q has no type", kernel, tok)
	}
	if !isPTXIdent(tok) {
		return 0, lx.errorf("kernel %s: %q where a parameter name belongs", kernel, tok)
	}
	for lx.peekIs('[') { // an array: .b8 name[16] for a struct passed by value
		lx.next()
		n, err := lx.number(kernel)
		if err != nil {
			return 0, err
		}
		if tok, err := lx.next(); err != nil || len(tok) != 1 || tok[0] != ']' {
			return 0, lx.errorf("kernel %s: array parameter without ']'", kernel)
		}
		size *= n
	}
	return size, nil
}

// number reads a positive decimal integer, as .align and array sizes take.
func (lx *ptxLexer) number(kernel string) (int, error) {
	tok, err := lx.next()
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(tok))
	if err != nil || n <= 0 || n > 1<<20 {
		return 0, lx.errorf("kernel %s: %q where a positive size belongs", kernel, tok)
	}
	return n, nil
}

// ptxTypeSize gives the size in bytes of the fundamental PTX types a kernel
// parameter may have.
var ptxTypeSize = map[string]int{
	".b8": 1, ".u8": 1, ".s8": 1,
	".b16": 2, ".u16": 2, ".s16": 2, ".f16": 2, ".bf16": 2,
	".b32": 4, ".u32": 4, ".s32": 4, ".f32": 4, ".f16x2": 4, ".bf16x2": 4,
	".b64": 8, ".u64": 8, ".s64": 8, ".f64": 8,
	".b128": 16,
}

// ptxLexer splits PTX text into tokens: directives (".entry"), identifiers,
// numbers, string literals and single punctuation characters, skipping
// comments.
type ptxLexer struct {
	src    []byte
	pos    int
	floats map[string]bool // kernels with a floating-point parameter (nil: not recorded)
}

// skipBody moves past a {} body or initializer whose '{' was just read, with
// the bodies nested in it: most of a module's text, so it looks only at the
// bytes that can open or close one, a comment or a string.
func (lx *ptxLexer) skipBody() error {
	depth := 1
	for {
		i := bytes.IndexAny(lx.src[lx.pos:], "{}/\"")
		if i < 0 {
			lx.pos = len(lx.src)
			return lx.errorf("unbalanced braces at the end of the text")
		}
		lx.pos += i
		switch lx.src[lx.pos] {
		case '{':
			depth++
			lx.pos++
		case '}':
			lx.pos++
			if depth--; depth == 0 {
				return nil
			}
		case '"':
			if _, err := lx.next(); err != nil {
				return err
			}
		case '/':
			start := lx.pos
			if err := lx.skipSpace(); err != nil {
				return err
			}
			if lx.pos == start {
				lx.pos++ // a lone slash, not a comment
			}
		}
	}
}

// next returns the next token, a slice of the source, or nil at the end.
func (lx *ptxLexer) next() ([]byte, error) {
	if err := lx.skipSpace(); err != nil {
		return nil, err
	}
	if lx.pos >= len(lx.src) {
		return nil, nil
	}
	start := lx.pos
	c := lx.src[lx.pos]
	switch {
	case c == '"':
		lx.pos++
		for lx.pos < len(lx.src) && lx.src[lx.pos] != '"' {
			switch lx.src[lx.pos] {
			case '\\':
				lx.pos++
			case '\n':
				return nil, lx.errorf("unterminated string")
			}
			lx.pos++
		}
		if lx.pos >= len(lx.src) {
			return nil, lx.errorf("unterminated string")
		}
		lx.pos++
	case c == '.' || c == '%' || isIdentByte(c):
		lx.pos++
		for lx.pos < len(lx.src) && isIdentByte(lx.src[lx.pos]) {
			lx.pos++
		}
	default:
		lx.pos++
	}
	return lx.src[start:lx.pos], nil
}

// peekIs reports whether the next token is the punctuation character c.
func (lx *ptxLexer) peekIs(c byte) bool {
	if lx.skipSpace() != nil {
		return false
	}
	return lx.pos < len(lx.src) && lx.src[lx.pos] == c
}

// skipSpace moves past white space and comments.
func (lx *ptxLexer) skipSpace() error {
	for lx.pos < len(lx.src) {
		switch c := lx.src[lx.pos]; {
		case c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			lx.pos++
		case c == '/' && lx.pos+1 < len(lx.src) && lx.src[lx.pos+1] == '/':
			for lx.pos < len(lx.src) && lx.src[lx.pos] != '\n' {
				lx.pos++
			}
		case c == '/' && lx.pos+1 < len(lx.src) && lx.src[lx.pos+1] == '*':
			lx.pos += 2
			for {
				if lx.pos+1 >= len(lx.src) {
					return lx.errorf("unterminated comment")
				}
				if lx.src[lx.pos] == '*' && lx.src[lx.pos+1] == '/' {
					lx.pos += 2
					break
				}
				lx.pos++
			}
		default:
			return nil
		}
	}
	return nil
}

// errorf returns a parse error naming the current line.
func (lx *ptxLexer) errorf(format string, args ...any) error {
	line := 1 + bytes.Count(lx.src[:min(lx.pos, len(lx.src))], []byte("\n"))
	return fmt.Errorf("cuda: PTX line %d: %s", line, fmt.Sprintf(format, args...))
}

// isIdentByte reports whether c may continue an identifier or number; a dot
// does not, so ".ptr.global" is two tokens.
func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$'
}

// isPTXIdent reports whether tok is a PTX identifier: a letter followed by
// letters, digits, '_' and '$', or '_', '$' or '%' followed by at least one.
func isPTXIdent(tok []byte) bool {
	if len(tok) == 0 {
		return false
	}
	c := tok[0]
	switch {
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return true
	case c == '_' || c == '$' || c == '%':
		return len(tok) > 1
	}
	return false
}
