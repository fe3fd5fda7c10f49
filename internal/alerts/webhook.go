package alerts

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Headers of a delivery. The signature is HMAC-SHA256 with the shared
// secret over the timestamp, a full stop and the raw body:
//
//	X-Switchboard-Signature: v1=hex(HMAC-SHA256(secret, timestamp + "." + body))
//
// A receiver recomputes it over the bytes it read, compares in constant
// time and refuses a timestamp more than a few minutes old (a replay).
const (
	HeaderEvent     = "X-Switchboard-Event"
	HeaderDelivery  = "X-Switchboard-Delivery"
	HeaderTimestamp = "X-Switchboard-Timestamp"
	HeaderSignature = "X-Switchboard-Signature"
)

// Sign is the X-Switchboard-Signature value of body sent at ts.
func Sign(secret []byte, ts int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a delivery's signature and that its timestamp is within
// tolerance of now (what a receiver written in Go would do).
func Verify(secret []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return fmt.Errorf("no valid %s", HeaderTimestamp)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("timestamp %d is %s from now", ts, d)
	}
	if !hmac.Equal([]byte(h.Get(HeaderSignature)), []byte(Sign(secret, ts, body))) {
		return fmt.Errorf("signature does not match")
	}
	return nil
}

// deliveryError is one failed attempt; retry says whether another may
// succeed (a transport error, 408, 429 or 5xx).
type deliveryError struct {
	msg   string
	retry bool
}

func (e *deliveryError) Error() string { return e.msg }

// post sends one attempt of a delivery.
func post(ctx context.Context, c *http.Client, url string, secret []byte, ev *Event, body []byte, now time.Time) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return &deliveryError{msg: "bad url"}
	}
	ts := now.Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "switchboard-alerts/1")
	req.Header.Set(HeaderEvent, ev.Type)
	req.Header.Set(HeaderDelivery, ev.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(secret, ts, body))
	resp, err := c.Do(req)
	if err != nil {
		return &deliveryError{msg: "transport: " + err.Error(), retry: true}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	resp.Body.Close()
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return nil
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500:
		return &deliveryError{msg: "status " + strconv.Itoa(s), retry: true}
	default:
		return &deliveryError{msg: "status " + strconv.Itoa(s)}
	}
}
