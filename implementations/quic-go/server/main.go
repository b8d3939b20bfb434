// Command server is the quic-go server of the interop runner: it serves the
// files in $WWW on $IP:$PORT over HTTP/3 (ALPN h3) or HTTP/0.9 (ALPN
// hq-interop) until it is terminated.
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

// logRequests logs one line per finished request.
func logRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		log.Printf("%s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)
		h.ServeHTTP(w, r)
		log.Printf("%s %s done after %s", r.Method, r.URL.Path, time.Since(start).Round(time.Millisecond))
	})
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("quic-go server: ")

	if err := common.ApplyParams(); err != nil {
		log.Fatal(err)
	}
	addr := net.JoinHostPort(common.Getenv("IP"), common.Getenv("PORT"))
	www := common.Getenv("WWW")
	certs := common.Getenv("CERTS")

	cert, err := tls.LoadX509KeyPair(certs+"/cert.pem", certs+"/priv.key")
	if err != nil {
		log.Fatalf("loading certificate: %v", err)
	}
	keyLog, err := common.KeyLog()
	if err != nil {
		log.Fatal(err)
	}
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}}
	if keyLog != nil {
		defer keyLog.Close()
		tlsConf.KeyLogWriter = keyLog
	}

	if os.Getenv("ALPN") == "hq-interop" {
		if err := serveHQ(addr, www, tlsConf); err != nil {
			log.Fatalf("server: %v", err)
		}
		log.Printf("stopped")
		return
	}

	server := &http3.Server{
		Addr:       addr,
		Handler:    logRequests(http.FileServer(http.Dir(www))),
		TLSConfig:  http3.ConfigureTLSConfig(tlsConf),
		QUICConfig: common.QUICConfig(),
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
		log.Fatalf("server: %v", err)
	}
	log.Printf("stopped")
}

// serveHQ serves HTTP/0.9 over QUIC (ALPN hq-interop): every bidirectional
// stream carries "GET /path\r\n"; the answer is the file's bytes, then FIN.
func serveHQ(addr, www string, tlsConf *tls.Config) error {
	tlsConf.NextProtos = []string{"hq-interop"}
	ln, err := quic.ListenAddr(addr, tlsConf, common.QUICConfig())
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
				go serveHQStream(str, www)
			}
		}()
	}
}

func serveHQStream(str *quic.Stream, www string) {
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
	buf := make([]byte, 1<<20)
	n, err := io.CopyBuffer(struct{ io.Writer }{str}, struct{ io.Reader }{f}, buf)
	if err != nil {
		log.Printf("GET %s: after %d bytes: %v", name, n, err)
		str.CancelWrite(1)
		return
	}
	log.Printf("GET %s: %s sent in %s", name, fmt.Sprint(n), time.Since(start).Round(time.Millisecond))
}
