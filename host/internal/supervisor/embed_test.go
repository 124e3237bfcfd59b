package supervisor

import "testing"

// TestWithoutEmbed: an adapter that does not claim Capabilities.Embed has
// embed dropped from its Accepts, so its worker never publishes it; a list
// of embed alone stays a stated set ("none"), not the legacy one ("").
func TestWithoutEmbed(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "", "embed": "none", "top_k,embed,seed": "top_k,seed", "none": "none"} {
		if got := withoutEmbed(in); got != want {
			t.Errorf("withoutEmbed(%q) = %q, want %q", in, got, want)
		}
	}
}
