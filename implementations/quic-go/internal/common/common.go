// Package common holds the bits shared by the interop server and client:
// reading the runner's environment, TLS key logging and qlog set-up.
package common

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	_ "unsafe" // for go:linkname

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
)

// crypto/tls has no setting for the TLS 1.3 cipher suites. It keeps the
// offered/accepted list in these variables, which it exports for linkname use
// by quic-go (see crypto/tls/defaults.go); quic-go's own tests set them the
// same way.
//
//go:linkname defaultCipherSuitesTLS13 crypto/tls.defaultCipherSuitesTLS13
var defaultCipherSuitesTLS13 []uint16

//go:linkname defaultCipherSuitesTLS13NoAES crypto/tls.defaultCipherSuitesTLS13NoAES
var defaultCipherSuitesTLS13NoAES []uint16

var cipherIDs = map[string]uint16{
	"TLS_AES_128_GCM_SHA256":       tls.TLS_AES_128_GCM_SHA256,
	"TLS_AES_256_GCM_SHA384":       tls.TLS_AES_256_GCM_SHA384,
	"TLS_CHACHA20_POLY1305_SHA256": tls.TLS_CHACHA20_POLY1305_SHA256,
}

// defaultMaxIncomingStreams is quic-go's limit on the streams a peer may have open at once
// when quic.Config.MaxIncomingStreams is 0 (internal/protocol/params.go
// DefaultMaxIncomingStreams).
const defaultMaxIncomingStreams = 100

// minBufSize is the smallest copy buffer BufSize hands out.
const minBufSize = 256 << 10

// Getenv returns the value of an environment variable that must be set.
func Getenv(name string) string {
	v := os.Getenv(name)
	if v == "" {
		log.Fatalf("environment variable %s is not set", name)
	}
	return v
}

// ApplyParams translates the runner's standard parameters (GSO, CIPHER) into
// the knobs quic-go and crypto/tls read. It must run before the first UDP
// socket is created. CONGESTION_CONTROL is not applied: quic-go always runs
// NewReno (see meta.yml).
func ApplyParams() error {
	if os.Getenv("GSO") == "0" {
		// read by quic-go (sys_conn_helper_linux.go) when it sets up the socket
		if err := os.Setenv("QUIC_GO_DISABLE_GSO", "true"); err != nil {
			return err
		}
		log.Printf("GSO disabled (QUIC_GO_DISABLE_GSO=true)")
	}
	if name := os.Getenv("CIPHER"); name != "" {
		id, ok := cipherIDs[name]
		if !ok {
			return fmt.Errorf("CIPHER: unknown TLS 1.3 cipher suite %q", name)
		}
		defaultCipherSuitesTLS13 = []uint16{id}
		defaultCipherSuitesTLS13NoAES = []uint16{id}
		log.Printf("TLS 1.3 cipher suites restricted to %s", name)
	}
	return nil
}

// ReportNegotiated prints the QIR_NEGOTIATED line the runner reads: the ALPN
// and cipher suite as crypto/tls reports them for this connection.
func ReportNegotiated(state tls.ConnectionState) {
	line, _ := json.Marshal(map[string]string{
		"alpn":   state.NegotiatedProtocol,
		"cipher": tls.CipherSuiteName(state.CipherSuite),
	})
	fmt.Fprintf(os.Stderr, "QIR_NEGOTIATED %s\n", line)
}

// KeyLog opens $SSLKEYLOGFILE for appending if it is set, else returns nil.
func KeyLog() (io.WriteCloser, error) {
	path := os.Getenv("SSLKEYLOGFILE")
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening key log file: %w", err)
	}
	return f, nil
}

// QUICConfig returns the QUIC configuration: quic-go's defaults, plus qlog
// output into $QLOGDIR when that is set.
func QUICConfig() *quic.Config {
	conf := &quic.Config{}
	if os.Getenv("QLOGDIR") != "" {
		// DefaultConnectionTracer writes <odcid>_<perspective>.sqlog into $QLOGDIR.
		conf.Tracer = qlog.DefaultConnectionTracer
	}
	return conf
}

// ClientQUICConfig returns QUICConfig with the client's flow-control window
// fixed at FLOW_CONTROL_WINDOW bytes where that is set: the initial and the
// largest receive window of every stream and of the connection, so that
// quic-go's auto-tuning (flow_controller_base.go maybeAdjustWindowSize, up to
// MaxStreamReceiveWindow / MaxConnectionReceiveWindow) cannot grow it. The
// credit then slides: bytes read + the window, granted again once a quarter
// of it was read (protocol.WindowUpdateThreshold).
func ClientQUICConfig() (*quic.Config, error) {
	conf := QUICConfig()
	value := os.Getenv("FLOW_CONTROL_WINDOW")
	if value == "" {
		return conf, nil
	}
	window, err := strconv.ParseUint(value, 10, 64)
	if err != nil || window == 0 {
		return nil, fmt.Errorf("FLOW_CONTROL_WINDOW must be a number of bytes above 0, not %q", value)
	}
	conf.InitialStreamReceiveWindow = window
	conf.MaxStreamReceiveWindow = window
	conf.InitialConnectionReceiveWindow = window
	conf.MaxConnectionReceiveWindow = window
	log.Printf("flow-control window fixed at %d bytes (connection and streams)", window)
	return conf, nil
}

// ErrUnsupported marks a request this harness cannot run; ExitCode makes it exit 127, which
// the runner records as "unsupported" (docs/implementations.md).
var ErrUnsupported = errors.New("unsupported")

// ExitCode is the exit status for the error that ended the program: 127 for ErrUnsupported,
// else 1.
func ExitCode(err error) int {
	if errors.Is(err, ErrUnsupported) {
		return 127
	}
	return 1
}

// Workload is what the runner asks of the pair (docs/implementations.md "Workloads"): which
// way data go and on how many streams of how many connections.
type Workload struct {
	Kind        string // download, upload or bidirectional
	Streams     int    // concurrent streams per connection and direction
	Connections int    // parallel client connections
}

// Downloads says whether the workload moves data from the server to the client.
func (w Workload) Downloads() bool { return w.Kind != "upload" }

// Uploads says whether the workload moves data from the client to the server.
func (w Workload) Uploads() bool { return w.Kind != "download" }

// ReadWorkload reads WORKLOAD, STREAMS and CONNECTIONS (empty or unset: download, 1, 1, the
// QUIC Interop Runner's single download). An upload over hq-interop is ErrUnsupported:
// HTTP/0.9 requests carry no body.
func ReadWorkload() (Workload, error) {
	w := Workload{Kind: os.Getenv("WORKLOAD"), Streams: 1, Connections: 1}
	switch w.Kind {
	case "":
		w.Kind = "download"
	case "download", "upload", "bidirectional":
	default:
		return w, fmt.Errorf("workload %q: %w", w.Kind, ErrUnsupported)
	}
	for _, v := range []struct {
		name string
		n    *int
	}{{"STREAMS", &w.Streams}, {"CONNECTIONS", &w.Connections}} {
		s := os.Getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return w, fmt.Errorf("%s must be a whole number >= 1, not %q", v.name, s)
		}
		*v.n = n
	}
	if w.Uploads() && os.Getenv("ALPN") == "hq-interop" {
		return w, fmt.Errorf("workload %s over hq-interop: %w (hq-interop requests carry no body)",
			w.Kind, ErrUnsupported)
	}
	return w, nil
}

// ServerQUICConfig is QUICConfig with room for the workload's request streams: the client
// opens STREAMS per direction on each connection at once, and beyond quic-go's default limit
// (100 open streams) its requests would wait for others to end.
func ServerQUICConfig(w Workload) *quic.Config {
	conf := QUICConfig()
	n := w.Streams
	if w.Downloads() && w.Uploads() {
		n *= 2
	}
	if n > defaultMaxIncomingStreams {
		conf.MaxIncomingStreams = int64(n)
	}
	return conf
}

// BufSize is the copy buffer of each of n transfers that run at once: all of size for one,
// else a share of it, but no less than 256 KiB (64 streams on 16 connections with a whole
// buffer each would take gigabytes).
func BufSize(size, n int) int {
	return max(size/max(n, 1), min(size, minBufSize))
}
