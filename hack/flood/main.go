// Command flood is one hostile client of the upgrade server, for make
// bench: from one source address it holds idle keep-alive connections,
// slow downloads (a few bytes now and then, never a stall) and HTTP/2
// connections that open many streams behind a zero flow-control window,
// so that the bench can measure what an honest client still gets. Every
// count and its duration are bounded; it stops by itself.
//
// Usage: flood -addr 127.0.0.1:PORT -source 127.0.0.2 -path /webhook/v1/update/... [-idle 4000 -slow 80 -h2 100 -for 2m]
//
// It prints one line "holding idle=N slow=N h2=N" once its clients are
// set up (what the server let it hold), then holds them until -for ends
// or it is signalled.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

func main() {
	addr := flag.String("addr", "", "the upgrade server (host:port), on this machine")
	source := flag.String("source", "127.0.0.2", "source address of every connection")
	path := flag.String("path", "", "path of a binary to download slowly")
	idle := flag.Int("idle", 4000, "idle keep-alive connections to hold")
	slow := flag.Int("slow", 80, "slow downloads to hold")
	h2 := flag.Int("h2", 100, "HTTP/2 connections with a zero window, 100 streams each")
	hold := flag.Duration("for", 2*time.Minute, "how long to hold them at most")
	flag.Parse()
	if *addr == "" || *path == "" || *idle > 10000 || *slow > 1000 || *h2 > 1000 || *hold > 30*time.Minute {
		fmt.Fprintln(os.Stderr, "flood: -addr and -path are required; at most 10000 idle, 1000 slow, 1000 h2, 30m")
		os.Exit(2)
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || !net.ParseIP(host).IsLoopback() || !net.ParseIP(*source).IsLoopback() {
		fmt.Fprintln(os.Stderr, "flood: only loopback addresses are flooded")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *hold)
	defer cancel()

	f := &flood{addr: *addr, dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(*source)}, Timeout: 10 * time.Second}, path: *path}
	var wg sync.WaitGroup
	var held struct{ idle, slow, h2 atomic.Int64 }
	sem := make(chan struct{}, 64) // clients set up at once
	start := func(n int, counter *atomic.Int64, run func(ready func()) error) {
		for range n {
			sem <- struct{}{}
			f.settingUp.Add(1)
			wg.Go(func() {
				setUp := sync.OnceFunc(func() { f.settingUp.Add(-1); <-sem })
				defer setUp()
				// A refused client is simply not held.
				_ = run(func() { counter.Add(1); setUp() })
			})
		}
	}
	go func() { <-ctx.Done(); f.closeAll() }()
	// The downloads first: idle connections alone would take every
	// connection the server lets one client have.
	start(*slow, &held.slow, f.slowDownload)
	start(*h2, &held.h2, f.zeroWindow)
	start(*idle, &held.idle, f.idle)
	// Setting up is done once every client is held or refused.
	for time.Sleep(time.Second); ctx.Err() == nil && f.settling(); time.Sleep(time.Second) {
	}
	fmt.Printf("holding idle=%d slow=%d h2=%d\n", held.idle.Load(), held.slow.Load(), held.h2.Load())
	<-ctx.Done()
	wg.Wait()
}

type flood struct {
	addr   string
	dialer *net.Dialer
	path   string
	mu     sync.Mutex
	conns  []net.Conn
	// settingUp counts clients neither held nor refused yet.
	settingUp atomic.Int64
}

func (f *flood) settling() bool { return f.settingUp.Load() > 0 }

func (f *flood) dial(protos ...string) (*tls.Conn, error) {
	c, err := tls.DialWithDialer(f.dialer, "tcp", f.addr, &tls.Config{InsecureSkipVerify: true, NextProtos: protos}) //nolint:gosec // the attacker trusts anything
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.mu.Unlock()
	return c, nil
}

func (f *flood) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}

// closeOnError closes a client's connection when the server refused it,
// so the next client may take its place.
func closeOnError(c net.Conn, err *error) {
	if *err != nil {
		c.Close()
	}
}

// idle asks for the listing once and keeps the connection open.
func (f *flood) idle(ready func()) (err error) {
	c, err := f.dial("http/1.1")
	if err != nil {
		return err
	}
	defer closeOnError(c, &err)
	if _, err := fmt.Fprintf(c, "GET /webhook/v1/update HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	ready()
	_, err = c.Read(make([]byte, 1)) // until the server or closeAll closes it
	return err
}

// slowDownload reads 1 KiB of a binary every 2 s: progress, never a stall.
func (f *flood) slowDownload(ready func()) (err error) {
	c, err := f.dial("http/1.1")
	if err != nil {
		return err
	}
	defer closeOnError(c, &err)
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", f.path); err != nil {
		return err
	}
	br := bufio.NewReaderSize(c, 1024)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	ready()
	buf := make([]byte, 1024)
	for {
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			return err
		}
		time.Sleep(2 * time.Second)
	}
}

// zeroWindow offers h2, advertises a zero flow-control window and opens
// 100 streams: each would hold a handler the server cannot answer.
func (f *flood) zeroWindow(ready func()) (err error) {
	c, err := f.dial("h2")
	if err != nil {
		return err // refused at the handshake: the server does not speak h2
	}
	defer closeOnError(c, &err)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return err
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		return err
	}
	var block strings.Builder
	enc := hpack.NewEncoder(&block)
	for i := range 100 {
		block.Reset()
		for _, h := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "x"}, {":path", "/webhook/v1/update"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: []byte(block.String()), EndStream: true, EndHeaders: true}); err != nil {
			return err
		}
	}
	ready()
	_, err = io.Copy(io.Discard, c)
	return err
}
