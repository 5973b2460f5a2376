//go:build !linux

package election

import "net"

// sockWatch is Linux-only (POLLRDHUP); elsewhere heartbeats are the detector.
type sockWatch struct{}

func watchSocket(net.Conn, func()) *sockWatch { return nil }

func (w *sockWatch) stop() {}
