package store

import "github.com/jackc/pgx/v5"

// SessionDefaults sets the session settings Loupe's connections run with, unless the database
// URL sets them itself: JIT compilation off. PostgreSQL compiles a statement whose estimated cost
// passes jit_above_cost, and a generic plan over many partitions of spans is estimated to cost
// that whatever it reads: with ten days of hour partitions (240) beside 10,000,000 spans, merging
// one span's end took 2.7 s, all of it compiling (auto_explain: "JIT: ... Total 2719 ms"), against
// 2.2 ms with day partitions (BenchmarkSpans10M, BENCHMARKS.md). Loupe's statements read rows by
// key, or a bounded page of them; none runs long enough for compiled expressions to pay back.
func SessionDefaults(cc *pgx.ConnConfig) {
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if _, set := cc.RuntimeParams["jit"]; !set {
		cc.RuntimeParams["jit"] = "off"
	}
}
