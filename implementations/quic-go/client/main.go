// Command client is the quic-go client of the interop runner: it runs the
// workload's requests over HTTP/3 (ALPN h3) or HTTP/0.9 (ALPN hq-interop) and
// exits non-zero on any failure. GETs of $REQUESTS go into $DOWNLOADS, PUTs of
// $UPLOAD_REQUESTS send files of $UPLOADS (h3 only); $CONNECTIONS connections
// run $STREAMS requests per direction each at once (docs/implementations.md
// "Workloads"). The default, one URL on one stream of one connection, is the
// QUIC Interop Runner's download.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"qir/quic-go/internal/common"
)

// copyBufSize is the size of the buffer between the response body and the file
// (shared out by common.BufSize when several downloads run at once).
const copyBufSize = 4 << 20

// target parses rawURL and returns it with its file name, the last path segment.
func target(rawURL string) (*url.URL, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", fmt.Errorf("parsing URL %q: %w", rawURL, err)
	}
	name := path.Base(u.Path)
	if name == "" || name == "/" || name == "." || name == ".." {
		return nil, "", fmt.Errorf("URL %q has no file name", rawURL)
	}
	return u, name, nil
}

func download(client *http.Client, rawURL, dir string, buf []byte) error {
	_, name, err := target(rawURL)
	if err != nil {
		return err
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

	file := filepath.Join(dir, name)
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	n, err := copyBody(f, rsp.Body, buf)
	if err != nil {
		f.Close()
		return fmt.Errorf("GET %s: after %d bytes: %w", rawURL, n, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	if rsp.ContentLength >= 0 && n != rsp.ContentLength {
		return fmt.Errorf("GET %s: got %d bytes, expected %d", rawURL, n, rsp.ContentLength)
	}
	logDone("GET", rawURL, n, start)
	return nil
}

// upload PUTs the file $UPLOADS/<name> to rawURL, its length announced, and
// counts it done when the server's 200 came: the server answers once it has
// closed the file. SIGINT (the runner stops a flow with a duration that way)
// cancels the request, which resets the stream: the client stops sending, and
// the server keeps what arrived.
func upload(client *http.Client, rawURL, dir string) error {
	_, name, err := target(rawURL)
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := &countingReader{r: f}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, rawURL, body)
	if err != nil {
		return fmt.Errorf("PUT %s: %w", rawURL, err)
	}
	req.ContentLength = info.Size()

	start := time.Now()
	defer onInterrupt(cancel)()
	rsp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("PUT %s: after %d bytes read from the file: %w", rawURL, body.n.Load(), err)
	}
	defer rsp.Body.Close()
	if rsp.TLS != nil {
		common.ReportNegotiated(*rsp.TLS)
	}
	if _, err := io.Copy(io.Discard, rsp.Body); err != nil {
		return fmt.Errorf("PUT %s: reading the answer: %w", rawURL, err)
	}
	if rsp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT %s: status %s", rawURL, rsp.Status)
	}
	logDone("PUT", rawURL, info.Size(), start)
	return nil
}

// countingReader counts the bytes read from r (by http3's goroutine that sends
// the request body), for the log of an upload cut short.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// logDone logs a finished request: its bytes, time and rate.
func logDone(method, rawURL string, n int64, start time.Time) {
	d := time.Since(start)
	log.Printf("%s %s: %d bytes in %s (%.1f Mbit/s)", method, rawURL, n, d.Round(time.Millisecond),
		float64(n)*8/d.Seconds()/1e6)
}

// onInterrupt calls stop when the process gets SIGINT (the runner stops a flow
// with a duration that way) before the returned function ends the watch.
// Every watch gets the signal, so concurrent transfers all stop.
func onInterrupt(stop func()) func() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt)
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			stop()
		case <-done:
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// stopOnInterrupt makes a pending Read of src return when the process gets
// SIGINT, so that copyBody writes what it has read before the client exits.
// The returned function ends the watch.
func stopOnInterrupt(src io.Reader) func() {
	return onInterrupt(func() {
		switch s := src.(type) {
		case interface{ CancelRead(quic.StreamErrorCode) }:
			s.CancelRead(0)
		case io.Closer:
			s.Close()
		}
	})
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

// session is one client connection; each request runs on a stream of its own.
type session interface {
	get(rawURL string, buf []byte) error
	put(rawURL string) error
	close()
}

// opener opens a session to the host of rawURL.
type opener func(rawURL string) (session, error)

// h3Session is one HTTP/3 connection: an http3.Transport of its own, which
// keeps one connection per host for all its requests and dials it for the
// first.
type h3Session struct {
	tr                 *http3.Transport
	client             *http.Client
	downloads, uploads string
}

func (s *h3Session) get(rawURL string, buf []byte) error {
	return download(s.client, rawURL, s.downloads, buf)
}

func (s *h3Session) put(rawURL string) error { return upload(s.client, rawURL, s.uploads) }

// close closes the QUIC connection, which also completes the qlog file.
func (s *h3Session) close() { s.tr.Close() }

func h3Opener(tlsConf *tls.Config, quicConf *quic.Config, downloads, uploads string) opener {
	return func(string) (session, error) {
		// a config each: http3.Transport sets fields of its own
		tr := &http3.Transport{TLSClientConfig: tlsConf, QUICConfig: quicConf.Clone()}
		return &h3Session{tr, &http.Client{Transport: tr}, downloads, uploads}, nil
	}
}

// hqSession is one HTTP/0.9 (hq-interop) connection: one bidirectional stream
// per file carrying "GET /path\r\n", answered by the file's bytes.
type hqSession struct {
	conn *quic.Conn
	dir  string
}

func hqOpener(tlsConf *tls.Config, quicConf *quic.Config, dir string) opener {
	tlsConf.NextProtos = []string{"hq-interop"}
	return func(rawURL string) (session, error) {
		u, err := url.Parse(rawURL)
		if err != nil {
			return nil, fmt.Errorf("parsing URL %q: %w", rawURL, err)
		}
		conn, err := quic.DialAddr(context.Background(), u.Host, tlsConf, quicConf)
		if err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", u.Host, err)
		}
		common.ReportNegotiated(conn.ConnectionState().TLS)
		return &hqSession{conn, dir}, nil
	}
}

func (s *hqSession) get(raw string, buf []byte) error {
	u, name, err := target(raw)
	if err != nil {
		return err
	}
	start := time.Now()
	str, err := s.conn.OpenStreamSync(context.Background())
	if err != nil {
		return fmt.Errorf("opening stream: %w", err)
	}
	if _, err := fmt.Fprintf(str, "GET %s\r\n", u.Path); err != nil {
		return fmt.Errorf("sending request: %w", err)
	}
	str.Close() // FIN on our side; the server answers on the same stream
	file := filepath.Join(s.dir, name)
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	n, err := copyBody(f, str, buf)
	if err != nil {
		f.Close()
		return fmt.Errorf("GET %s: after %d bytes: %w", raw, n, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	logDone("GET", raw, n, start)
	return nil
}

// put is never called: common.ReadWorkload refuses uploads over hq-interop.
func (s *hqSession) put(string) error { return errors.New("hq-interop requests carry no body") }

func (s *hqSession) close() { s.conn.CloseWithError(0, "") }

// job is one request: a GET into DOWNLOADS or a PUT from UPLOADS.
type job struct {
	url string
	put bool
}

func (j job) run(s session, buf []byte) error {
	if j.put {
		return s.put(j.url)
	}
	return s.get(j.url, buf)
}

// plan deals the requests out to the connections in rounds: connection c runs
// the requests at positions c*streams .. c*streams+streams-1 of each list at
// once, round 0, which is all of it when each list has streams x conns URLs
// (the workload contract). A longer list (a QIR client's several REQUESTS on
// one stream) goes on in further rounds of that shape, one after the other.
func plan(gets, puts []string, streams, conns int) [][][]job {
	rounds := make([][][]job, conns)
	add := func(urls []string, put bool) {
		for i, u := range urls {
			batch := i / streams
			c, r := batch%conns, batch/conns
			for len(rounds[c]) <= r {
				rounds[c] = append(rounds[c], nil)
			}
			rounds[c][r] = append(rounds[c][r], job{u, put})
		}
	}
	add(gets, false)
	add(puts, true)
	return rounds
}

// all runs f(0) .. f(n-1) at once (f(0) alone in this goroutine) and returns
// their errors joined once all have returned.
func all(n int, f func(i int) error) error {
	if n == 1 {
		return f(0)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runConn opens one connection and runs its rounds on it, one after the other.
// Each download slot has its own copy buffer, reused from round to round.
func runConn(open opener, rounds [][]job, bufSize int) error {
	if len(rounds) == 0 {
		return nil // fewer URLs than connections
	}
	s, err := open(rounds[0][0].url)
	if err != nil {
		return err
	}
	defer s.close()
	var bufs [][]byte
	for _, round := range rounds {
		for i, j := range round {
			if i == len(bufs) {
				bufs = append(bufs, nil)
			}
			if !j.put && bufs[i] == nil {
				bufs[i] = make([]byte, bufSize)
			}
		}
		if err := all(len(round), func(i int) error { return round[i].run(s, bufs[i]) }); err != nil {
			return err
		}
	}
	return nil
}

// requests returns the URLs of the workload's directions: REQUESTS (GET) and
// UPLOAD_REQUESTS (PUT), each required when the workload moves data that way.
func requests(w common.Workload) (gets, puts []string) {
	if w.Downloads() {
		gets = strings.Fields(common.Getenv("REQUESTS"))
	}
	if w.Uploads() {
		puts = strings.Fields(common.Getenv("UPLOAD_REQUESTS"))
	}
	return gets, puts
}

func tlsConfig() (*tls.Config, io.Closer, error) {
	certs := common.Getenv("CERTS")
	caPEM, err := os.ReadFile(filepath.Join(certs, "ca.pem"))
	if err != nil {
		return nil, nil, fmt.Errorf("reading CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("no certificate found in %s/ca.pem", certs)
	}
	keyLog, err := common.KeyLog()
	if err != nil {
		return nil, nil, err
	}
	tlsConf := &tls.Config{RootCAs: pool}
	if keyLog != nil {
		tlsConf.KeyLogWriter = keyLog
	}
	return tlsConf, keyLog, nil
}

func run() error {
	if err := common.ApplyParams(); err != nil {
		return err
	}
	w, err := common.ReadWorkload()
	if err != nil {
		return err
	}
	gets, puts := requests(w)
	var downloads, uploads string
	if w.Downloads() {
		downloads = common.Getenv("DOWNLOADS")
	}
	if w.Uploads() {
		uploads = common.Getenv("UPLOADS")
	}

	tlsConf, keyLog, err := tlsConfig()
	if err != nil {
		return err
	}
	if keyLog != nil {
		defer keyLog.Close()
	}
	quicConf, err := common.ClientQUICConfig()
	if err != nil {
		return err
	}
	var open opener
	if os.Getenv("ALPN") == "hq-interop" {
		open = hqOpener(tlsConf, quicConf, downloads)
	} else {
		open = h3Opener(tlsConf, quicConf, downloads, uploads)
	}

	rounds := plan(gets, puts, w.Streams, w.Connections)
	bufSize := common.BufSize(copyBufSize, w.Streams*w.Connections)
	return all(len(rounds), func(c int) error { return runConn(open, rounds[c], bufSize) })
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("quic-go client: ")
	if err := run(); err != nil {
		log.Printf("error: %v", err)
		os.Exit(common.ExitCode(err))
	}
}
