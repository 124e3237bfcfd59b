package tlsconfig

import (
	"context"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// Credentials returns gRPC transport credentials that take Config afresh
// for each connection: a connection made after the CA file or the client
// certificate changed verifies against, and presents, the new ones;
// established connections keep theirs.
func (c *Client) Credentials() credentials.TransportCredentials {
	return &clientCreds{c: c, info: credentials.NewTLS(c.Config()).Info()}
}

type clientCreds struct {
	c    *Client
	info credentials.ProtocolInfo
}

func (cc *clientCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(cc.c.Config()).ClientHandshake(ctx, authority, raw)
}

func (cc *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsconfig: a Client's credentials serve no connections")
}

func (cc *clientCreds) Info() credentials.ProtocolInfo { return cc.info }

func (cc *clientCreds) Clone() credentials.TransportCredentials {
	return &clientCreds{c: cc.c, info: cc.info}
}

// OverrideServerName is gRPC's deprecated way to set the name checked;
// ClientFiles.ServerName is vigil's.
func (cc *clientCreds) OverrideServerName(name string) error {
	files := cc.c.files
	files.ServerName = name
	cc.c = &Client{files: files, reload: cc.c.reload}
	return nil
}

// Credentials are gRPC transport credentials over s.Config("h2") that
// log each refused handshake (a client without the certificate the client
// CA requires, a plaintext client...) as Refusals does.
func (s *Server) Credentials() credentials.TransportCredentials {
	return &serverCreds{TransportCredentials: credentials.NewTLS(s.Config("h2")), refusals: s.refusals}
}

type serverCreds struct {
	credentials.TransportCredentials
	refusals *Refusals
}

func (sc *serverCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := sc.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		sc.refusals.Refused("grpc", raw.RemoteAddr().String(), err)
	}
	return conn, info, err
}

func (sc *serverCreds) Clone() credentials.TransportCredentials {
	return &serverCreds{TransportCredentials: sc.TransportCredentials.Clone(), refusals: sc.refusals}
}
