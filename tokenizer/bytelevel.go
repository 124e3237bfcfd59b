package tokenizer

import "strings"

// GPT-2's byte alphabet, shared by the ByteLevel pre-tokenizer and
// normalizer (bytes to characters) and the ByteLevel decoder (back).

// byteChars maps each byte to GPT-2's printable alphabet: the printable
// Latin-1 bytes are themselves, the others 256, 257... in byte order.
var byteChars = func() (m [256]rune) {
	n := rune(0)
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xa1 && b <= 0xac || b >= 0xae {
			m[b] = rune(b)
		} else {
			m[b] = 256 + n
			n++
		}
	}
	return m
}()

// byteLevelText writes s's bytes in GPT-2's alphabet.
func byteLevelText(s string) string {
	var sb strings.Builder
	sb.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		sb.WriteRune(byteChars[s[i]])
	}
	return sb.String()
}

// charBytes inverts byteChars: the byte each character of the alphabet
// stands for, plus one (0: not in the alphabet).
var charBytes = func() (m [0x144]uint16) {
	for b, r := range byteChars {
		m[r] = uint16(b) + 1
	}
	return m
}()

// byteOfChar is the byte the alphabet's character r stands for.
func byteOfChar(r rune) (byte, bool) {
	if r < 0 || int(r) >= len(charBytes) || charBytes[r] == 0 {
		return 0, false
	}
	return byte(charBytes[r] - 1), true
}
