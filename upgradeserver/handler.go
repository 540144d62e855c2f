package upgradeserver

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"
	"github.com/rs/zerolog"

	"github.com/object-store-operator/operator/binstore"
)

// UpdatePath is where the listing is served and below which the files are.
const UpdatePath = "/webhook/v1/update"

var (
	jsonContentType = []string{"application/json"}
	noCache         = []string{"no-cache"}
)

type handler struct {
	store   Catalog
	metrics *Metrics
	// listing is the rendered listing of the snapshot it was made for.
	listing atomic.Pointer[renderedListing]
	// base is what the listing's URLs start with (Config.BaseURL).
	base string
	log  zerolog.Logger
	// access writes one line per request; nil: no access log.
	access *zerolog.Logger
	// stall is how long a download may make no progress before the
	// connection is dropped; a client that stops reading cannot hold a
	// connection forever. minRate (bytes a second) is what a download must
	// average over each stall window, so one that trickles cannot either.
	stall   time.Duration
	minRate int64
	// downloads is every party's share of the binary downloads in
	// progress; past it a download is answered 503 with Retry-After
	// instead of taking a copy buffer.
	downloads *shares
	clients   Clients
	// recorders are reused across requests: nothing holds one after its
	// request is answered.
	recorders sync.Pool
}

// newHandler builds the router. Paths are matched raw (encoded, uncleaned):
// a file name is only ever a key into the index, so "..", "%2e%2e", "%2f",
// backslashes or NUL simply never match a file, and no path from a request
// is ever handed to the file system.
func newHandler(h *handler) http.Handler {
	r := mux.NewRouter()
	r.SkipClean(true)
	r.UseEncodedPath()
	r.Handle(UpdatePath, methods(http.HandlerFunc(h.list))).Name(routeNames[routeList])
	r.Handle(UpdatePath+"/", methods(http.HandlerFunc(h.list))).Name(routeNames[routeList])
	r.Handle(UpdatePath+"/{file}", methods(http.HandlerFunc(h.file))).Name(routeNames[routeFile])
	r.Handle(UpdatePath+"/{platform}/{file}", methods(http.HandlerFunc(h.file))).Name(routeNames[routeFile])
	r.Handle(UpdatePath+"/sha256/{digest}/{file}", methods(http.HandlerFunc(h.file))).Name(routeNames[routeDigest])
	r.Handle(UpdatePath+"/sha256/{digest}/{component}/{file}", methods(http.HandlerFunc(h.file))).Name(routeNames[routeTenant])
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 page not found", http.StatusNotFound)
	})
	return h.observe(r)
}

// methods answers 405 with an Allow header for anything but GET and HEAD.
func methods(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// listingOf returns the rendered listing of snap, rendering it once: one
// listing a snapshot, whatever the requests carry, is all that is cached.
func (h *handler) listingOf(snap *binstore.Snapshot) (*renderedListing, error) {
	if l := h.listing.Load(); l != nil && l.snap == snap {
		return l, nil
	}
	l, err := renderListing(snap, h.base)
	if err != nil {
		return nil, err
	}
	h.listing.Store(l)
	return l, nil
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	l, err := h.listingOf(h.store.Current())
	if err != nil {
		h.log.Error().Err(err).Msg("cannot render listing")
		http.Error(w, "cannot render listing", http.StatusInternalServerError)
		return
	}
	// Canonical keys and shared, never-mutated value slices: no
	// allocations for headers on the hot path.
	hdr := w.Header()
	hdr["Content-Type"] = jsonContentType
	hdr["Etag"] = l.etag
	hdr["Cache-Control"] = noCache
	if inm := r.Header["If-None-Match"]; len(inm) > 0 && etagMatches(inm[0], l.etag[0]) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hdr["Content-Length"] = l.length
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(l.body)
}

func (h *handler) file(w http.ResponseWriter, r *http.Request) {
	vars := mux.Vars(r)
	name, platform, digest, component := vars["file"], vars["platform"], vars["digest"], vars["component"]
	if !binstore.ValidFileName(name) || (platform != "" && !binstore.ValidPlatform(platform)) {
		http.Error(w, "invalid file name", http.StatusBadRequest)
		return
	}
	key := name
	switch {
	case digest != "":
		// Only the lower-case hex form: every other spelling of a digest
		// is simply not a key of the index.
		if !binstore.ValidDigest(digest) {
			http.Error(w, "invalid digest", http.StatusBadRequest)
			return
		}
		key = "sha256/" + digest + "/" + name
	case platform != "":
		key = platform + "/" + name
	}
	var ref binstore.File
	var ok bool
	if component != "" {
		// Any wrong component is a plain 404, the same as a digest
		// nothing has: the answer tells nothing about the bytes.
		ref, ok = h.store.Current().TenantFile(digest, component, name)
	} else {
		ref, ok = h.store.Current().Lookup(key)
	}
	if !ok {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	b := ref.Binary
	switch ref.Kind {
	case binstore.KindSHA256Sum:
		serveSmall(w, r, name, "text/plain; charset=utf-8", b.ModTime, b.SHA256Sum())
	case binstore.KindMinisig:
		serveSmall(w, r, name, "application/octet-stream", b.ModTime, b.Minisig())
	default:
		h.serveBinary(w, r, b)
	}
}

func serveSmall(w http.ResponseWriter, r *http.Request, name, contentType string, mod time.Time, data []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("ETag", `"`+contentETag(data)+`"`)
	http.ServeContent(w, r, name, mod, bytes.NewReader(data))
}

func (h *handler) serveBinary(w http.ResponseWriter, r *http.Request, b *binstore.Binary) {
	f, err := h.store.Open(b)
	if errors.Is(err, fs.ErrNotExist) {
		// Changed since it was indexed, and no longer verifies: dropped.
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	if err != nil {
		h.log.Warn().Str("file", b.Path()).Err(err).Msg("binary changed after indexing; asking the client to retry")
		w.Header().Set("Retry-After", "1")
		http.Error(w, "binary is being replaced, retry shortly", http.StatusServiceUnavailable)
		return
	}
	defer f.Close()

	if r.Method == http.MethodGet {
		who := clientFrom(r.Context())
		// A pod whose ObjectStore is updating to this binary is held only
		// to its own party's cap: MinIO fails the update on a 503, and no
		// one else's downloads may cause that. There are at most as many
		// such parties as updates in flight.
		updating := who.namespace != "" && h.clients.Updating(who.namespace, b.SHA256)
		if !h.downloads.acquire(who, updating) {
			h.refuseDownload(w, r)
			return
		}
		defer h.downloads.release(who)
		h.metrics.countDownload(h.store.Current(), b)
		h.metrics.inFlight.Inc()
		defer h.metrics.inFlight.Dec()
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/octet-stream")
	hdr.Set("ETag", `"`+b.SHA256+`"`)
	hdr.Set("X-Content-Sha256", b.SHA256)
	// The section reader reads with pread, so the download cannot run past
	// the size that was verified, even if the file grows.
	content := io.NewSectionReader(f, 0, b.Size)
	http.ServeContent(&progressWriter{ResponseWriter: w, rc: http.NewResponseController(w), stall: h.stall, minRate: h.minRate}, r, b.Name, b.ModTime, content)
}

// refuseDownload answers a download past its party's share: 503 with
// Retry-After, except to MinIO's update client, which reads the body as
// the binary whatever the status (cmd/update.go, downloadBinary) and would
// report a wrong checksum, a failure the operator could not tell from the
// tenant's own. Its connection is closed instead, before any answer:
// MinIO then says it could not fetch the URL, which the operator knows
// for its own refusal (updates: downloadRefused) and retries.
func (h *handler) refuseDownload(w http.ResponseWriter, r *http.Request) {
	h.metrics.rejected.Inc()
	if strings.HasPrefix(r.UserAgent(), minioUserAgent) {
		if rec, ok := w.(*recorder); ok {
			rec.status = http.StatusServiceUnavailable
		}
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	w.Header().Set("Retry-After", "5")
	http.Error(w, "too many downloads in progress, retry shortly", http.StatusServiceUnavailable)
}

// minioUserAgent starts the User-Agent of MinIO's update client
// ("MinIO (linux; amd64; ...").
const minioUserAgent = "MinIO ("

// errTooSlow ends a download that moved less than the minimum rate over a
// window; net/http then closes the connection (the body is short of its
// Content-Length), freeing the slot.
var errTooSlow = errors.New("download slower than the minimum rate")

// progressWriter pushes the write deadline forward while the client keeps
// reading, so a stalled client is dropped after stall, and ends a download
// that moved less than minRate a second over a window of stall, so that
// a slot is held for a bounded time or above a minimum rate.
type progressWriter struct {
	http.ResponseWriter
	rc       *http.ResponseController
	stall    time.Duration
	minRate  int64
	extended time.Time
	// window is when the current rate window started; moved, the bytes
	// written in it.
	window time.Time
	moved  int64
}

func (p *progressWriter) Write(b []byte) (int, error) {
	if p.stall > 0 {
		now := time.Now()
		switch {
		case p.window.IsZero():
			p.window = now
		case now.Sub(p.window) >= p.stall:
			if p.minRate > 0 && float64(p.moved) < float64(p.minRate)*now.Sub(p.window).Seconds() {
				return 0, errTooSlow
			}
			p.window, p.moved = now, 0
		}
		// Pushed forward at most once a second (a deadline costs a
		// syscall), and often enough for a short stall.
		if now.Sub(p.extended) > min(time.Second, p.stall/4) {
			p.extended = now
			_ = p.rc.SetWriteDeadline(now.Add(p.stall))
		}
	}
	n, err := p.ResponseWriter.Write(b)
	p.moved += int64(n)
	return n, err
}

// ReadFrom copies with a large pooled buffer: io.Copy's default 32 KiB
// would cost four times as many reads of the file for the same TLS records.
func (p *progressWriter) ReadFrom(r io.Reader) (int64, error) {
	bufp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bufp)
	return io.CopyBuffer(writerOnly{p}, r, *bufp)
}

// writerOnly hides ReadFrom so io.CopyBuffer uses the buffer it is given.
type writerOnly struct{ io.Writer }

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func (p *progressWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// etagMatches implements the weak comparison If-None-Match asks for.
func etagMatches(header, etag string) bool {
	for _, candidate := range strings.Split(header, ",") {
		candidate = strings.TrimSpace(candidate)
		if candidate == "*" || strings.TrimPrefix(candidate, "W/") == etag {
			return true
		}
	}
	return false
}

// observe records metrics and writes the access log (when there is one)
// for every request.
// The listing, the hot path (every pod polls it), is dispatched before the
// router: it has no variables, and the router would copy the request twice
// to attach its route and vars to the context.
func (h *handler) observe(router *mux.Router) http.Handler {
	list := methods(http.HandlerFunc(h.list))
	router.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if rec, ok := w.(*recorder); ok {
				if route := mux.CurrentRoute(r); route != nil {
					rec.route = routeNamed(route.GetName())
				}
			}
			next.ServeHTTP(w, r)
		})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec, _ := h.recorders.Get().(*recorder)
		if rec == nil {
			rec = new(recorder)
		}
		*rec = recorder{ResponseWriter: w, status: http.StatusOK, route: routeNone}
		defer func() {
			*rec = recorder{}
			h.recorders.Put(rec)
		}()
		if p := r.URL.Path; (p == UpdatePath || p == UpdatePath+"/") && r.URL.RawPath == "" {
			rec.route = routeList
			list.ServeHTTP(rec, r)
		} else {
			router.ServeHTTP(rec, r)
		}
		end := time.Now()
		took := end.Sub(start)
		h.metrics.requests.observe(r, rec.route, rec.status, took, rec.bytes)
		if h.access == nil {
			return
		}
		if ev := h.access.Info(); ev.Enabled() {
			// The clock read for the duration stamps the line too.
			ev.Time(zerolog.TimestampFieldName, end).
				Str("method", r.Method).
				Str("path", r.URL.EscapedPath()).
				Int("status", rec.status).
				Int64("bytes", rec.bytes).
				Dur("duration", took).
				Str("remote", r.RemoteAddr).
				Str("proto", r.Proto).
				Msg("request")
		}
	})
}

type recorder struct {
	http.ResponseWriter
	route       route
	status      int
	bytes       int64
	wroteHeader bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
