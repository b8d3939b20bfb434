// Command client is the quic-go client of the interop runner: it downloads
// every URL in $REQUESTS into $DOWNLOADS over HTTP/3 (ALPN h3) or HTTP/0.9
// (ALPN hq-interop), one after the other over one QUIC connection, and exits
// non-zero on any failure.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"qir/quic-go/internal/common"
)

// copyBufSize is the size of the buffer between the response body and the file.
const copyBufSize = 4 << 20

func download(client *http.Client, rawURL, dir string, buf []byte) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("parsing URL %q: %w", rawURL, err)
	}
	name := path.Base(u.Path)
	if name == "" || name == "/" || name == "." || name == ".." {
		return fmt.Errorf("URL %q has no file name", rawURL)
	}

	start := time.Now()
	rsp, err := client.Get(rawURL)
	if err != nil {
		return fmt.Errorf("GET %s: %w", rawURL, err)
	}
	defer rsp.Body.Close()
	if rsp.TLS != nil {
		common.ReportNegotiated(*rsp.TLS)
	}
	if rsp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %s", rawURL, rsp.Status)
	}

	target := filepath.Join(dir, name)
	f, err := os.Create(target)
	if err != nil {
		return err
	}
	n, err := copyBody(f, rsp.Body, buf)
	if err != nil {
		f.Close()
		return fmt.Errorf("GET %s: after %d bytes: %w", rawURL, n, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", target, err)
	}
	if rsp.ContentLength >= 0 && n != rsp.ContentLength {
		return fmt.Errorf("GET %s: got %d bytes, expected %d", rawURL, n, rsp.ContentLength)
	}
	d := time.Since(start)
	log.Printf("GET %s: %d bytes in %s (%.1f Mbit/s)", rawURL, n, d.Round(time.Millisecond),
		float64(n)*8/d.Seconds()/1e6)
	return nil
}

// stopOnInterrupt makes a pending Read of src return when the process gets
// SIGINT (the runner stops a flow with a duration that way), so that copyBody
// writes what it has read before the client exits. The returned function ends
// the watch.
func stopOnInterrupt(src io.Reader) func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			switch s := src.(type) {
			case interface{ CancelRead(quic.StreamErrorCode) }:
				s.CancelRead(0)
			case io.Closer:
				s.Close()
			}
		case <-done:
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// copyBody copies src to dst through buf. It is a plain loop (rather than
// io.CopyBuffer) so that the large buffer is really used: *os.File implements
// io.ReaderFrom, which would otherwise copy in 32 KiB chunks.
func copyBody(dst io.Writer, src io.Reader, buf []byte) (int64, error) {
	defer stopOnInterrupt(src)()
	var total int64
	for {
		nr, rerr := io.ReadFull(src, buf)
		if nr > 0 {
			nw, werr := dst.Write(buf[:nr])
			total += int64(nw)
			if werr != nil {
				return total, werr
			}
		}
		switch rerr {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			return total, nil
		default:
			return total, rerr
		}
	}
}

func run() error {
	if err := common.ApplyParams(); err != nil {
		return err
	}
	requests := strings.Fields(common.Getenv("REQUESTS"))
	downloads := common.Getenv("DOWNLOADS")
	certs := common.Getenv("CERTS")

	caPEM, err := os.ReadFile(filepath.Join(certs, "ca.pem"))
	if err != nil {
		return fmt.Errorf("reading CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no certificate found in %s/ca.pem", certs)
	}
	keyLog, err := common.KeyLog()
	if err != nil {
		return err
	}
	tlsConf := &tls.Config{RootCAs: pool}
	if keyLog != nil {
		defer keyLog.Close()
		tlsConf.KeyLogWriter = keyLog
	}

	quicConf, err := common.ClientQUICConfig()
	if err != nil {
		return err
	}
	if os.Getenv("ALPN") == "hq-interop" {
		return runHQ(requests, downloads, tlsConf, quicConf)
	}

	tr := &http3.Transport{
		TLSClientConfig: tlsConf,
		QUICConfig:      quicConf,
	}
	// Closing the transport closes the QUIC connection, which also completes the qlog file.
	defer tr.Close()
	client := &http.Client{Transport: tr}

	buf := make([]byte, copyBufSize)
	for _, u := range requests {
		if err := download(client, u, downloads, buf); err != nil {
			return err
		}
	}
	return nil
}

// runHQ downloads the URLs over HTTP/0.9 (hq-interop): one bidirectional
// stream per file carrying "GET /path\r\n", answered by the file's bytes.
func runHQ(requests []string, dir string, tlsConf *tls.Config, quicConf *quic.Config) error {
	if len(requests) == 0 {
		return nil
	}
	first, err := url.Parse(requests[0])
	if err != nil {
		return fmt.Errorf("parsing URL %q: %w", requests[0], err)
	}
	tlsConf.NextProtos = []string{"hq-interop"}
	ctx := context.Background()
	conn, err := quic.DialAddr(ctx, first.Host, tlsConf, quicConf)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", first.Host, err)
	}
	defer conn.CloseWithError(0, "")
	common.ReportNegotiated(conn.ConnectionState().TLS)
	buf := make([]byte, copyBufSize)
	for _, raw := range requests {
		u, err := url.Parse(raw)
		if err != nil {
			return fmt.Errorf("parsing URL %q: %w", raw, err)
		}
		name := path.Base(u.Path)
		if name == "" || name == "/" || name == "." || name == ".." {
			return fmt.Errorf("URL %q has no file name", raw)
		}
		start := time.Now()
		str, err := conn.OpenStreamSync(ctx)
		if err != nil {
			return fmt.Errorf("opening stream: %w", err)
		}
		if _, err := fmt.Fprintf(str, "GET %s\r\n", u.Path); err != nil {
			return fmt.Errorf("sending request: %w", err)
		}
		str.Close() // FIN on our side; the server answers on the same stream
		target := filepath.Join(dir, name)
		f, err := os.Create(target)
		if err != nil {
			return err
		}
		n, err := copyBody(f, str, buf)
		if err != nil {
			f.Close()
			return fmt.Errorf("GET %s: after %d bytes: %w", raw, n, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("writing %s: %w", target, err)
		}
		d := time.Since(start)
		log.Printf("GET %s: %d bytes in %s (%.1f Mbit/s)", raw, n, d.Round(time.Millisecond),
			float64(n)*8/d.Seconds()/1e6)
	}
	return nil
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("quic-go client: ")
	if err := run(); err != nil {
		log.Printf("error: %v", err)
		os.Exit(1)
	}
}
