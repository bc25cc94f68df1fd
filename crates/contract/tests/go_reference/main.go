// The reference the Worker's JSON writer is compared with byte for byte: Go's own encoding/json
// and time packages (standard library only, no modules).
//
// Usage:
//
//	go_reference encode          reads requests on stdin, one per line, answers one line each
//	go_reference sweep32 LO HI   every float32 bit pattern in [LO, HI) (hexadecimal), see below
//
// A request is `KIND ARG`; the answer is `COMPACT INDENTED`, the hexadecimal bytes of
// json.Marshal(v) and json.MarshalIndent(v, "", "  "), or `error MESSAGE` when Go refuses the
// value. KIND and ARG:
//
//	f64 BITS      a float64 from its bits (hexadecimal)
//	f32 BITS      a float32 from its bits (hexadecimal)
//	i64 N, u64 N  an integer (decimal)
//	str HEX       a string holding these bytes (valid UTF-8 or not)
//	key HEX       map[string]int{string(bytes): 1}: the bytes as an object key
//	json HEX      JSON text decoded into an interface{} (numbers become float64) and re-encoded,
//	              as the Go Worker re-encodes a JSON column
//	time S N      time.Unix(S, N).UTC(), as a time.Time marshals
//	result HEX    a result document, map[string]map[string][]map[string]interface{} (connection,
//	              table, rows), from JSON text whose leaves are [KIND, ARG...] lists of the
//	              kinds above (ARG as above; `time` has two) or ["bytes", HEX] ([]byte, base64),
//	              ["bool", "true"|"false"], ["null"]; as the Go Worker assembles its result
//	body HEX      a terminal event body (the Go Worker's struct, docs/UPSTREAM-NOTES.md §6.1) from
//	              JSON text: {"jobId", "metadata" (an object, decoded as Go decodes it),
//	              "status", "error" (failed: replaces metadata.error), "result" ({"path",
//	              "sizeBytes", "rowCount", "hmac"} or absent), "executionTimeMs",
//	              "completedAt" ([S, N], or absent)}
//
// sweep32 writes, for each run of 65536 bit patterns, json.Marshal of the []float32 of the finite
// ones (encoding/json refuses NaN and the infinities) on its own line.
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) == 4 && os.Args[1] == "sweep32" {
		lo, err1 := strconv.ParseUint(os.Args[2], 16, 64)
		hi, err2 := strconv.ParseUint(os.Args[3], 16, 64)
		if err1 != nil || err2 != nil || lo > hi || hi > 1<<32 {
			fail("sweep32 wants LO HI in hexadecimal, LO <= HI <= 100000000")
		}
		sweep32(lo, hi)
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "encode" {
		encode()
		return
	}
	fail("usage: go_reference encode | go_reference sweep32 LO HI")
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, "go_reference:", message)
	os.Exit(2)
}

func sweep32(lo, hi uint64) {
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer out.Flush()
	const run = 1 << 16
	values := make([]float32, 0, run)
	for start := lo; start < hi; start += run {
		end := start + run
		if end > hi {
			end = hi
		}
		values = values[:0]
		for b := start; b < end; b++ {
			f := math.Float32frombits(uint32(b))
			if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
				values = append(values, f)
			}
		}
		text, err := json.Marshal(values)
		if err != nil {
			fail(err.Error())
		}
		out.Write(text)
		out.WriteByte('\n')
	}
}

func encode() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		kind, arg, _ := strings.Cut(in.Text(), " ")
		v, err := value(kind, arg)
		if err != nil {
			fail(fmt.Sprintf("bad request %q: %v", in.Text(), err))
		}
		compact, err := json.Marshal(v)
		if err != nil {
			fmt.Fprintf(out, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		indented, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			fail(err.Error())
		}
		fmt.Fprintf(out, "%x %x\n", compact, indented)
	}
	if err := in.Err(); err != nil {
		fail(err.Error())
	}
}

func value(kind, arg string) (interface{}, error) {
	switch kind {
	case "f64":
		b, err := strconv.ParseUint(arg, 16, 64)
		return math.Float64frombits(b), err
	case "f32":
		b, err := strconv.ParseUint(arg, 16, 32)
		return math.Float32frombits(uint32(b)), err
	case "i64":
		return strconv.ParseInt(arg, 10, 64)
	case "u64":
		return strconv.ParseUint(arg, 10, 64)
	case "str":
		b, err := hex.DecodeString(arg)
		return string(b), err
	case "key":
		b, err := hex.DecodeString(arg)
		return map[string]int{string(b): 1}, err
	case "json":
		b, err := hex.DecodeString(arg)
		if err != nil {
			return nil, err
		}
		var v interface{}
		err = json.Unmarshal(b, &v)
		return v, err
	case "result":
		return result(arg)
	case "body":
		return body(arg)
	case "time":
		s, n, _ := strings.Cut(arg, " ")
		secs, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, err
		}
		nanos, err := strconv.ParseInt(n, 10, 64)
		return time.Unix(secs, nanos).UTC(), err
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}

func result(arg string) (interface{}, error) {
	b, err := hex.DecodeString(arg)
	if err != nil {
		return nil, err
	}
	var spec map[string]map[string][]map[string][]string
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, err
	}
	doc := map[string]map[string][]map[string]interface{}{}
	for connection, tables := range spec {
		doc[connection] = map[string][]map[string]interface{}{}
		for table, rows := range tables {
			out := []map[string]interface{}{}
			for _, row := range rows {
				values := map[string]interface{}{}
				for column, leaf := range row {
					v, err := resultLeaf(leaf)
					if err != nil {
						return nil, err
					}
					values[column] = v
				}
				out = append(out, values)
			}
			doc[connection][table] = out
		}
	}
	return doc, nil
}

func resultLeaf(leaf []string) (interface{}, error) {
	switch {
	case len(leaf) == 1 && leaf[0] == "null":
		return nil, nil
	case len(leaf) == 2 && leaf[0] == "bytes":
		return hex.DecodeString(leaf[1])
	case len(leaf) == 2 && leaf[0] == "bool":
		return leaf[1] == "true", nil
	case len(leaf) >= 2:
		return value(leaf[0], strings.Join(leaf[1:], " "))
	}
	return nil, fmt.Errorf("bad leaf %q", leaf)
}

// The Go Worker's terminal event payload: field order, omitempty and types as it declares them.
type terminalBody struct {
	JobID           string                 `json:"jobId"`
	Metadata        map[string]interface{} `json:"metadata"`
	Status          string                 `json:"status"`
	Result          *resultInfo            `json:"result,omitempty"`
	ExecutionTimeMs int64                  `json:"executionTimeMs,omitempty"`
	CompletedAt     *time.Time             `json:"completedAt,omitempty"`
}

type resultInfo struct {
	Path       string      `json:"path,omitempty"`
	SizeBytes  int64       `json:"sizeBytes,omitempty"`
	RowCount   int64       `json:"rowCount,omitempty"`
	Format     string      `json:"format,omitempty"`
	HMAC       string      `json:"hmac,omitempty"`
	Integrity  *integrity  `json:"integrity,omitempty"`
	Protection *protection `json:"protection,omitempty"`
}

type integrity struct {
	Algorithm string `json:"algorithm"`
	Signature string `json:"signature"`
}

type protection struct {
	Encrypted bool   `json:"encrypted"`
	Mode      string `json:"mode"`
	AppliedBy string `json:"appliedBy"`
}

func body(arg string) (interface{}, error) {
	b, err := hex.DecodeString(arg)
	if err != nil {
		return nil, err
	}
	var spec struct {
		JobID           string                 `json:"jobId"`
		Metadata        map[string]interface{} `json:"metadata"`
		Status          string                 `json:"status"`
		Error           *string                `json:"error"`
		Result          *resultInfo            `json:"result"`
		ExecutionTimeMs int64                  `json:"executionTimeMs"`
		CompletedAt     []int64                `json:"completedAt"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, err
	}
	out := terminalBody{
		JobID:           spec.JobID,
		Metadata:        spec.Metadata,
		Status:          spec.Status,
		Result:          spec.Result,
		ExecutionTimeMs: spec.ExecutionTimeMs,
	}
	if out.Metadata == nil {
		out.Metadata = map[string]interface{}{}
	}
	if spec.Error != nil {
		out.Metadata["error"] = map[string]interface{}{"message": *spec.Error}
	}
	if out.Result != nil {
		out.Result.Format = "json"
		out.Result.Integrity = &integrity{Algorithm: "HMAC-SHA256", Signature: out.Result.HMAC}
		out.Result.Protection = &protection{Encrypted: true, Mode: "adapter-managed", AppliedBy: "adapter"}
	}
	if len(spec.CompletedAt) == 2 {
		at := time.Unix(spec.CompletedAt[0], spec.CompletedAt[1]).UTC()
		out.CompletedAt = &at
	}
	return out, nil
}
