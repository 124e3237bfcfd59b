package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// The decoders, as the Rust library's decoders/*.rs (and the Decoder
// halves of pre_tokenizers/byte_level.rs, metaspace.rs and
// normalizers/replace.rs) define them. Each is one step of the chain:
// tokens in, tokens out; Decode joins the last step's tokens.

func init() {
	decoderTypes["ByteLevel"] = newByteLevelDecoder
	decoderTypes["Metaspace"] = newMetaspaceDecoder
	decoderTypes["ByteFallback"] = func(json.RawMessage, string) (decoderStep, error) { return byteFallbackDecoder{}, nil }
	decoderTypes["Fuse"] = func(json.RawMessage, string) (decoderStep, error) { return fuseDecoder{}, nil }
	decoderTypes["Strip"] = newStripDecoder
	decoderTypes["Replace"] = newReplaceDecoder
	decoderTypes["Sequence"] = newSequenceDecoder
	// These go with models the module refuses (WordPiece, CTC heads) or
	// with BPE files using end_of_word_suffix, whose decoder gives the last
	// token a different text than the same token followed by more: text
	// already streamed could not stay exact.
	for _, typ := range []string{"WordPiece", "CTC", "BPEDecoder"} {
		decoderTypes[typ] = refusedDecoder(typ)
	}
}

func refusedDecoder(typ string) decoderFactory {
	return func(_ json.RawMessage, path string) (decoderStep, error) {
		return nil, &FieldError{Field: path + ".type", Value: fmt.Sprintf("%q", typ),
			Reason: "this decoder is not supported (it goes with WordPiece, CTC or end_of_word_suffix BPE models); supported: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence"}
	}
}

// decodeFields reads obj into v, naming path on a type mismatch.
func decodeFields(obj json.RawMessage, path string, v any) error {
	if err := json.Unmarshal(obj, v); err != nil {
		field := path
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			field = path + "." + te.Field
		}
		return &FieldError{Field: field, Reason: "cannot read: " + err.Error()}
	}
	return nil
}

// oneChar reads a JSON string holding exactly one character (a Rust char).
func oneChar(s *string, path string) (rune, error) {
	if s == nil {
		return 0, &FieldError{Field: path, Reason: "missing (one character is required)"}
	}
	r, size := utf8.DecodeRuneInString(*s)
	if size == 0 || size != len(*s) {
		return 0, &FieldError{Field: path, Value: fmt.Sprintf("%q", *s), Reason: "must be exactly one character"}
	}
	return r, nil
}

// byteLevelDecoder maps GPT-2's byte alphabet back to bytes and the bytes
// to text; a token with a character outside the alphabet (an added token
// such as "<|eot_id|>" may have one) gives its own UTF-8 bytes. Its
// options (add_prefix_space, trim_offsets, use_regex) do not affect
// decoding.
type byteLevelDecoder struct{}

func newByteLevelDecoder(json.RawMessage, string) (decoderStep, error) {
	return byteLevelDecoder{}, nil
}

func (byteLevelDecoder) decodeChain(tokens []string) []string {
	var buf []byte
	for _, tok := range tokens {
		buf = appendByteLevel(buf, tok)
	}
	return []string{lossyUTF8(buf)}
}

func appendByteLevel(buf []byte, tok string) []byte {
	start := len(buf)
	for _, r := range tok {
		b, ok := byteOfChar(r)
		if !ok {
			return append(buf[:start], tok...)
		}
		buf = append(buf, b)
	}
	return buf
}

// lossyUTF8 is Rust's String::from_utf8_lossy: each maximal prefix of an
// invalid or truncated sequence becomes one U+FFFD (Go's own conversion
// gives one per byte: a character cut after 3 of its 4 bytes would end in
// three U+FFFD, not one).
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r != utf8.RuneError || size > 1 {
			sb.Write(b[:size])
			b = b[size:]
			continue
		}
		sb.WriteRune(utf8.RuneError)
		b = b[invalidPrefix(b):]
	}
	return sb.String()
}

// invalidPrefix is the length of the maximal subpart at b's start: its
// first byte and the continuation bytes that could still have followed
// it in a valid sequence (Unicode's "substitution of maximal subparts").
func invalidPrefix(b []byte) int {
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}

// metaspaceDecoder turns the replacement character back into spaces; in
// the first token every one is dropped unless prepend_scheme is "never"
// (the Rust library's rule: transformers.js drops only a leading space,
// and only with add_prefix_space; the Rust library wins).
type metaspaceDecoder struct {
	replacement rune
	dropFirst   bool
}

func newMetaspaceDecoder(obj json.RawMessage, path string) (decoderStep, error) {
	var c struct {
		Replacement    *string `json:"replacement"`
		PrependScheme  *string `json:"prepend_scheme"`
		AddPrefixSpace *bool   `json:"add_prefix_space"`
		Split          *bool   `json:"split"`
	}
	if err := decodeFields(obj, path, &c); err != nil {
		return nil, err
	}
	r, err := oneChar(c.Replacement, path+".replacement")
	if err != nil {
		return nil, err
	}
	scheme := "always"
	if c.PrependScheme != nil {
		scheme = *c.PrependScheme
	}
	if scheme != "always" && scheme != "first" && scheme != "never" {
		return nil, &FieldError{Field: path + ".prepend_scheme", Value: fmt.Sprintf("%q", scheme), Reason: `must be "always", "first" or "never"`}
	}
	if c.AddPrefixSpace != nil && !*c.AddPrefixSpace && scheme != "never" {
		return nil, &FieldError{Field: path + ".add_prefix_space", Value: "false",
			Reason: `does not match prepend_scheme ` + fmt.Sprintf("%q", scheme) + ` (false needs "never"), as the Rust library refuses it`}
	}
	return metaspaceDecoder{replacement: r, dropFirst: scheme != "never"}, nil
}

func (m metaspaceDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		with := " "
		if i == 0 && m.dropFirst {
			with = ""
		}
		out[i] = strings.ReplaceAll(tok, string(m.replacement), with)
	}
	return out
}

// byteFallbackDecoder turns runs of "<0xNN>" tokens into the text of
// their bytes; a run that is not valid UTF-8 gives one U+FFFD per byte
// token (the Rust library's rule), or, lossy (the streaming Decoder's),
// one per maximal invalid subpart as transformers.js's TextDecoder gives
// (the engines' streamed text), which keeps a run's text stable as bytes
// are added.
type byteFallbackDecoder struct{ lossy bool }

func (d byteFallbackDecoder) decodeChain(tokens []string) []string {
	out := make([]string, 0, len(tokens))
	var run []byte
	flush := func() {
		switch {
		case len(run) == 0:
			return
		case utf8.Valid(run) || d.lossy:
			out = append(out, lossyUTF8(run))
		default:
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, tok := range tokens {
		if b, ok := byteToken(tok); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, tok)
	}
	flush()
	return out
}

// byteToken reads a "<0xNN>" token as the Rust library does: 6 bytes,
// and the two in the middle parsed by u8::from_str_radix (which takes a
// leading "+").
func byteToken(tok string) (byte, bool) {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return 0, false
	}
	digits := tok[3:5]
	if digits[0] == '+' {
		digits = digits[1:]
	}
	var v byte
	for i := 0; i < len(digits); i++ {
		d, ok := hexDigit(digits[i])
		if !ok {
			return 0, false
		}
		v = v<<4 | d
	}
	return v, true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// fuseDecoder joins the tokens into one.
type fuseDecoder struct{}

func (fuseDecoder) decodeChain(tokens []string) []string {
	return []string{strings.Join(tokens, "")}
}

// stripDecoder removes up to start leading and stop trailing content
// characters from each token.
type stripDecoder struct {
	content     rune
	start, stop int
}

func newStripDecoder(obj json.RawMessage, path string) (decoderStep, error) {
	var c struct {
		Content *string `json:"content"`
		Start   *uint32 `json:"start"`
		Stop    *uint32 `json:"stop"`
	}
	if err := decodeFields(obj, path, &c); err != nil {
		return nil, err
	}
	r, err := oneChar(c.Content, path+".content")
	if err != nil {
		return nil, err
	}
	if c.Start == nil || c.Stop == nil {
		return nil, &FieldError{Field: path, Reason: "start and stop are required (non-negative integers)"}
	}
	return stripDecoder{content: r, start: int(*c.Start), stop: int(*c.Stop)}, nil
}

func (s stripDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		out[i] = s.strip(tok)
	}
	return out
}

// strip cuts as the Rust library does; where its loops would cross (a
// token shorter than start+stop content characters, on which it panics)
// the token becomes "".
func (s stripDecoder) strip(tok string) string {
	chars := []rune(tok)
	from := 0
	for from < s.start && from < len(chars) && chars[from] == s.content {
		from++
	}
	to := len(chars)
	for i := 0; i < s.stop && to > from && chars[to-1] == s.content; i++ {
		to--
	}
	if from == 0 && to == len(chars) {
		return tok
	}
	return string(chars[from:to])
}

// replaceDecoder replaces every match of a literal or a regex in each
// token by content (taken literally: "$1" is not a group reference).
type replaceDecoder struct {
	literal string
	re      *regexp2.Regexp
	content string
}

func newReplaceDecoder(obj json.RawMessage, path string) (decoderStep, error) {
	var c struct {
		Pattern *struct {
			String *string `json:"String"`
			Regex  *string `json:"Regex"`
		} `json:"pattern"`
		Content *string `json:"content"`
	}
	if err := decodeFields(obj, path, &c); err != nil {
		return nil, err
	}
	if c.Content == nil {
		return nil, &FieldError{Field: path + ".content", Reason: "missing"}
	}
	p := c.Pattern
	switch {
	case p == nil || (p.String == nil) == (p.Regex == nil):
		return nil, &FieldError{Field: path + ".pattern", Reason: `must be {"String": ...} or {"Regex": ...}`}
	case p.String != nil && *p.String == "":
		return nil, &FieldError{Field: path + ".pattern.String", Value: `""`, Reason: "must not be empty"}
	case p.String != nil:
		return replaceDecoder{literal: *p.String, content: *c.Content}, nil
	}
	re, err := compileRegexp(*p.Regex)
	if err != nil {
		return nil, &FieldError{Field: path + ".pattern.Regex", Value: fmt.Sprintf("%q", *p.Regex), Reason: "not a valid regex: " + err.Error()}
	}
	return replaceDecoder{re: re, content: *c.Content}, nil
}

func (r replaceDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		out[i] = r.replace(tok)
	}
	return out
}

func (r replaceDecoder) replace(tok string) string {
	if r.re == nil {
		return strings.ReplaceAll(tok, r.literal, r.content)
	}
	s, err := r.re.ReplaceFunc(tok, func(regexp2.Match) string { return r.content }, -1, -1)
	if err != nil {
		// Only a match timeout fails, and none is set.
		return tok
	}
	return s
}

// sequenceDecoder runs its decoders in order.
type sequenceDecoder []decoderStep

func newSequenceDecoder(obj json.RawMessage, path string) (decoderStep, error) {
	var c struct {
		Decoders *[]json.RawMessage `json:"decoders"`
	}
	if err := decodeFields(obj, path, &c); err != nil {
		return nil, err
	}
	if c.Decoders == nil {
		return nil, &FieldError{Field: path + ".decoders", Reason: "missing (a list of decoders)"}
	}
	seq := make(sequenceDecoder, 0, len(*c.Decoders))
	for i, member := range *c.Decoders {
		at := fmt.Sprintf("%s.decoders[%d]", path, i)
		d, err := buildDecoder(member, at)
		if err != nil {
			return nil, err
		}
		if d == nil {
			return nil, &FieldError{Field: at, Value: "null", Reason: "must be a decoder object"}
		}
		seq = append(seq, d)
	}
	return seq, nil
}

func (s sequenceDecoder) decodeChain(tokens []string) []string {
	for _, d := range s {
		tokens = d.decodeChain(tokens)
	}
	return tokens
}

// streamingChain is d with ByteFallback lossy: the chain the streaming
// Decoder decodes with.
func streamingChain(d decoderStep) decoderStep {
	switch d := d.(type) {
	case byteFallbackDecoder:
		return byteFallbackDecoder{lossy: true}
	case sequenceDecoder:
		seq := make(sequenceDecoder, len(d))
		for i, m := range d {
			seq[i] = streamingChain(m)
		}
		return seq
	}
	return d
}
