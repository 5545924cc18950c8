package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/loupe-dev/loupe/internal/trace"
)

// tracingConfig is tracing's part of the configuration, from the environment:
//
//	LOUPE_INGEST_TOKEN            bearer token trace ingest needs when not bound to loopback
//	LOUPE_INGEST_MAX_BODY         largest ingest body, compressed or not (default 16M)
//	LOUPE_TRACE_RETENTION_DAYS    delete traces older than this many days (default 0: keep)
//	LOUPE_TRACE_MAX_SPANS         keep at most this many spans, newest first (default 0: no cap)
//	LOUPE_TRACE_HOURLY_ABOVE      spans a day from which, with a retention age, span partitions
//	                              are an hour wide instead of a day (default 100000000; 0 never)
//	OTEL_EXPORTER_OTLP_*          also forward Loupe's own spans to an OTLP/HTTP endpoint
type tracingConfig struct {
	IngestToken   string
	MaxBody       int64
	RetentionDays int
	MaxSpans      int64
	HourlyAbove   int64
}

// defaultHourlyAbove is LOUPE_TRACE_HOURLY_ABOVE's default: a hundred million spans a day (about
// 1,200 a second, a hundred gigabytes of kilobyte spans), past which a day's partition is a lot to
// vacuum, index and drop at once.
const defaultHourlyAbove = 100_000_000

func tracingConfigFromEnv() (tracingConfig, error) {
	c := tracingConfig{IngestToken: os.Getenv("LOUPE_INGEST_TOKEN"), MaxBody: trace.DefaultMaxBodyBytes, HourlyAbove: defaultHourlyAbove}
	if v := os.Getenv("LOUPE_INGEST_MAX_BODY"); v != "" {
		n, err := parseSize(v)
		if err != nil {
			return c, fmt.Errorf("LOUPE_INGEST_MAX_BODY %q: want bytes, or a number with K, M or G", v)
		}
		c.MaxBody = n
	}
	if v := os.Getenv("LOUPE_TRACE_RETENTION_DAYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return c, fmt.Errorf("LOUPE_TRACE_RETENTION_DAYS %q: want a whole number of days", v)
		}
		c.RetentionDays = n
	}
	if v := os.Getenv("LOUPE_TRACE_MAX_SPANS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return c, fmt.Errorf("LOUPE_TRACE_MAX_SPANS %q: want a whole number", v)
		}
		c.MaxSpans = n
	}
	if v := os.Getenv("LOUPE_TRACE_HOURLY_ABOVE"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return c, fmt.Errorf("LOUPE_TRACE_HOURLY_ABOVE %q: want a whole number of spans a day", v)
		}
		c.HourlyAbove = n
	}
	return c, nil
}

func parseSize(v string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(strings.ToUpper(v), "K"):
		mult, v = 1<<10, v[:len(v)-1]
	case strings.HasSuffix(strings.ToUpper(v), "M"):
		mult, v = 1<<20, v[:len(v)-1]
	case strings.HasSuffix(strings.ToUpper(v), "G"):
		mult, v = 1<<30, v[:len(v)-1]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size")
	}
	return n * mult, nil
}
