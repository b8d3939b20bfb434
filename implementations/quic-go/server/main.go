// Command server is the quic-go server of the interop runner: it serves the
// files in $WWW on $IP:$PORT over HTTP/3 (ALPN h3) or HTTP/0.9 (ALPN
// hq-interop) until it is terminated. Over HTTP/3 it also takes uploads: a PUT
// writes its body to $UPLOADS/<name> (docs/implementations.md "Workloads").
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"qir/quic-go/internal/common"
)

// uploadBufSize is the size of the buffer between an upload's body and its file,
// and of a hq-interop download's (shared out by common.BufSize when several
// run at once).
const uploadBufSize = 1 << 20

// logRequests logs one line per finished request.
func logRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		log.Printf("%s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)
		h.ServeHTTP(w, r)
		log.Printf("%s %s done after %s", r.Method, r.URL.Path, time.Since(start).Round(time.Millisecond))
	})
}

// withUploads answers PUT with receive and every other method with h.
func withUploads(h http.Handler, dir string, bufSize int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			h.ServeHTTP(w, r)
			return
		}
		receive(w, r, dir, bufSize)
	})
}

// receive stores the body of a PUT in dir under the URL's name and answers 200,
// with an empty body, only once the file is closed: the client counts the
// upload done with that answer.
func receive(w http.ResponseWriter, r *http.Request, dir string, bufSize int) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	if dir == "" {
		http.Error(w, "uploads are not enabled (UPLOADS is not set)", http.StatusForbidden)
		return
	}
	if name == "" || strings.Contains(name, "/") || strings.Contains(name, "..") {
		http.Error(w, "bad file name", http.StatusBadRequest)
		return
	}
	start := time.Now()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		log.Printf("PUT %s: %v", name, err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	n, err := store(f, r.Body, bufSize)
	if err != nil {
		log.Printf("PUT %s: after %d bytes: %v", name, n, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d := time.Since(start)
	log.Printf("PUT %s: %d bytes received in %s (%.1f Mbit/s)", name, n, d.Round(time.Millisecond),
		float64(n)*8/d.Seconds()/1e6)
	w.WriteHeader(http.StatusOK)
}

// store writes body to f as it arrives and closes f. A body cut short (the
// client stopped at a duration, a reset stream) leaves what arrived: the runner
// verifies it as a prefix.
func store(f *os.File, body io.Reader, bufSize int) (int64, error) {
	// The wrappers hide *os.File's ReadFrom, which would copy in 32 KiB chunks.
	n, err := io.CopyBuffer(struct{ io.Writer }{f}, struct{ io.Reader }{body}, make([]byte, bufSize))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("quic-go server: ")
	if err := run(); err != nil {
		log.Printf("error: %v", err)
		os.Exit(common.ExitCode(err))
	}
	log.Printf("stopped")
}

func run() error {
	if err := common.ApplyParams(); err != nil {
		return err
	}
	wl, err := common.ReadWorkload()
	if err != nil {
		return err
	}
	uploads := os.Getenv("UPLOADS") // without it PUTs are refused (403)
	if wl.Uploads() {
		uploads = common.Getenv("UPLOADS")
	}
	// the uploads (h3) or downloads (hq-interop) that run at once
	bufSize := common.BufSize(uploadBufSize, wl.Streams*wl.Connections)
	addr := net.JoinHostPort(common.Getenv("IP"), common.Getenv("PORT"))
	www := common.Getenv("WWW")

	tlsConf, keyLog, err := tlsConfig(common.Getenv("CERTS"))
	if err != nil {
		return err
	}
	if keyLog != nil {
		defer keyLog.Close()
	}
	quicConf := common.ServerQUICConfig(wl)
	if os.Getenv("ALPN") == "hq-interop" {
		if err := serveHQ(addr, www, tlsConf, quicConf, bufSize); err != nil {
			return fmt.Errorf("server: %w", err)
		}
		return nil
	}
	handler := logRequests(withUploads(http.FileServer(http.Dir(www)), uploads, bufSize))
	return serveH3(addr, www, handler, tlsConf, quicConf)
}

// tlsConfig loads the server certificate from certs and opens the key log.
func tlsConfig(certs string) (*tls.Config, io.Closer, error) {
	cert, err := tls.LoadX509KeyPair(certs+"/cert.pem", certs+"/priv.key")
	if err != nil {
		return nil, nil, fmt.Errorf("loading certificate: %w", err)
	}
	keyLog, err := common.KeyLog()
	if err != nil {
		return nil, nil, err
	}
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}}
	if keyLog != nil {
		tlsConf.KeyLogWriter = keyLog
	}
	return tlsConf, keyLog, nil
}

// serveH3 serves HTTP/3 with handler until SIGTERM or SIGINT.
func serveH3(addr, www string, handler http.Handler, tlsConf *tls.Config, quicConf *quic.Config) error {
	server := &http3.Server{
		Addr:       addr,
		Handler:    handler,
		TLSConfig:  http3.ConfigureTLSConfig(tlsConf),
		QUICConfig: quicConf,
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
			go func() {
				select {
				case <-c.HandshakeComplete():
					common.ReportNegotiated(c.ConnectionState().TLS)
				case <-c.Context().Done():
				}
			}()
			return ctx
		},
	}

	// On SIGTERM/SIGINT close the server, so that open connections are closed
	// and their qlog files are complete.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sigs
		log.Printf("received %s, closing", s)
		_ = server.Close()
	}()

	log.Printf("serving %s on %s (h3)", www, addr)
	if err := server.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// serveHQ serves HTTP/0.9 over QUIC (ALPN hq-interop): every bidirectional
// stream carries "GET /path\r\n"; the answer is the file's bytes, then FIN.
func serveHQ(addr, www string, tlsConf *tls.Config, quicConf *quic.Config, bufSize int) error {
	tlsConf.NextProtos = []string{"hq-interop"}
	ln, err := quic.ListenAddr(addr, tlsConf, quicConf)
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sigs
		log.Printf("received %s, closing", s)
		_ = ln.Close()
	}()
	log.Printf("serving %s on %s (hq-interop)", www, addr)
	for {
		conn, err := ln.Accept(context.Background())
		if err != nil {
			if errors.Is(err, quic.ErrServerClosed) {
				return nil
			}
			return err
		}
		common.ReportNegotiated(conn.ConnectionState().TLS)
		go func() {
			for {
				str, err := conn.AcceptStream(context.Background())
				if err != nil {
					return
				}
				go serveHQStream(str, www, bufSize)
			}
		}()
	}
}

func serveHQStream(str *quic.Stream, www string, bufSize int) {
	defer str.Close()
	line, err := bufio.NewReader(io.LimitReader(str, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		log.Printf("reading request: %v", err)
		str.CancelWrite(1)
		return
	}
	req := strings.TrimSpace(line)
	if !strings.HasPrefix(req, "GET /") {
		log.Printf("bad request %q", req)
		str.CancelWrite(1)
		return
	}
	name := path.Clean(strings.TrimPrefix(req, "GET "))
	f, err := os.Open(filepath.Join(www, filepath.FromSlash(name)))
	if err != nil {
		log.Printf("GET %s: %v", name, err)
		str.CancelWrite(1)
		return
	}
	defer f.Close()
	start := time.Now()
	buf := make([]byte, bufSize)
	n, err := io.CopyBuffer(struct{ io.Writer }{str}, struct{ io.Reader }{f}, buf)
	if err != nil {
		log.Printf("GET %s: after %d bytes: %v", name, n, err)
		str.CancelWrite(1)
		return
	}
	log.Printf("GET %s: %s sent in %s", name, fmt.Sprint(n), time.Since(start).Round(time.Millisecond))
}
