// prom-check reads a Prometheus text exposition (format 0.0.4) on standard input, parses it with
// the Prometheus project's own text parser (github.com/prometheus/common/expfmt, which promtool
// and the client libraries use) and lints it with promlint (the rules of `promtool check
// metrics`). It prints the metric families it read, and every lint problem, as JSON on standard
// output; text that does not parse exits 1 with the parser's error on standard error.
//
// Cairn's tests use it to check /metrics with a parser that is not Cairn's own (test/support/prom-check.ts).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

type bucket struct {
	Le    string `json:"le"`
	Count uint64 `json:"count"`
}

type sample struct {
	Labels  map[string]string `json:"labels"`
	Value   *float64          `json:"value,omitempty"`
	Count   *uint64           `json:"count,omitempty"`
	Sum     *float64          `json:"sum,omitempty"`
	Buckets []bucket          `json:"buckets,omitempty"`
}

type family struct {
	Name    string   `json:"name"`
	Type    string   `json:"type"`
	Help    string   `json:"help"`
	Samples []sample `json:"samples"`
}

type problem struct {
	Metric string `json:"metric"`
	Text   string `json:"text"`
}

type report struct {
	Families []family  `json:"families"`
	Problems []problem `json:"problems"`
}

// number keeps a sample's value as JSON can carry it: +Inf, -Inf and NaN are not JSON numbers.
func number(v float64) *float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return nil
	}
	return &v
}

func main() {
	text, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "prom-check: reading standard input: %v\n", err)
		os.Exit(2)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	parsed, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		fmt.Fprintf(os.Stderr, "prom-check: the exposition does not parse: %v\n", err)
		os.Exit(1)
	}
	names := make([]string, 0, len(parsed))
	for name := range parsed {
		names = append(names, name)
	}
	sort.Strings(names)
	out := report{Families: []family{}, Problems: []problem{}}
	mfs := make([]*dto.MetricFamily, 0, len(names))
	for _, name := range names {
		mf := parsed[name]
		mfs = append(mfs, mf)
		f := family{Name: name, Type: mf.GetType().String(), Help: mf.GetHelp(), Samples: []sample{}}
		for _, m := range mf.GetMetric() {
			s := sample{Labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.Value = number(m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				s.Value = number(m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				s.Value = number(m.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				count, sum := h.GetSampleCount(), h.GetSampleSum()
				s.Count, s.Sum = &count, number(sum)
				for _, b := range h.GetBucket() {
					s.Buckets = append(s.Buckets, bucket{Le: fmt.Sprint(b.GetUpperBound()), Count: b.GetCumulativeCount()})
				}
			}
			f.Samples = append(f.Samples, s)
		}
		out.Families = append(out.Families, f)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		fmt.Fprintf(os.Stderr, "prom-check: linting: %v\n", err)
		os.Exit(1)
	}
	for _, p := range problems {
		out.Problems = append(out.Problems, problem{Metric: p.Metric, Text: p.Text})
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "prom-check: writing the report: %v\n", err)
		os.Exit(2)
	}
}
