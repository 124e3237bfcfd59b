package consul

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// tokenFile is the token of CONSUL_HTTP_TOKEN_FILE, which consul/api reads
// once, when the client is made: a token rotated in the file (by Vault
// Agent, a Nomad template) would be refused until a restart (nomad
// #9813). It is read again after each refusal instead.
type tokenFile struct {
	path string

	mu    sync.Mutex
	token string // "": the client's own, read from the file at its start
}

// newTokenFile takes path's token as the client read it.
func newTokenFile(path string) *tokenFile {
	t := &tokenFile{path: path}
	t.reread()
	return t
}

// get is the token to send; "" leaves the client's.
func (t *tokenFile) get() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.token
}

// reread reads the file again and reports whether it holds another token
// than the one sent. An empty file keeps the token, as consul/api does.
func (t *tokenFile) reread() (changed bool, err error) {
	if t == nil {
		return false, nil
	}
	data, err := os.ReadFile(t.path)
	if err != nil {
		return false, fmt.Errorf("re-reading the token file %s: %w", t.path, err)
	}
	token := strings.TrimSpace(string(data))
	t.mu.Lock()
	defer t.mu.Unlock()
	if token == "" || token == t.token {
		return false, nil
	}
	t.token = token
	return true, nil
}

// authorized runs call with the token to send; when Consul refuses it
// (403), the token file is read again, and call made once more with a new
// token in it.
func (c *Registry) authorized(call func(token string) error) error {
	err := call(c.token.get())
	if c.token == nil || !isForbidden(err) {
		return err
	}
	changed, rerr := c.token.reread()
	switch {
	case rerr != nil:
		return fmt.Errorf("%w (%v)", err, rerr)
	case changed:
		return call(c.token.get())
	}
	return err
}
