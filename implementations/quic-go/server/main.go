// Command server is the quic-go HTTP/3 server of the interop runner: it serves
// the files in $WWW on $IP:$PORT until it is terminated.
package main

import (
	"crypto/tls"
	"errors"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

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

	server := &http3.Server{
		Addr:       addr,
		Handler:    logRequests(http.FileServer(http.Dir(www))),
		TLSConfig:  http3.ConfigureTLSConfig(tlsConf),
		QUICConfig: common.QUICConfig(),
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
