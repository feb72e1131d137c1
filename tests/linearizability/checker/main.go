// Command checker reads a history of sparkraft admin operations (JSON lines) and checks it with
// Porcupine against a sequential model of the metadata those operations touch: per topic, whether
// it exists and its retention.ms. Exit 0: linearizable; 1: not (a visualization is written where
// -html says); 2: the history could not be read; 3: the checker timed out.
//
// Each line: {"client":N,"op":"create|delete|set|read","key":"topic","value":"...","call":ns,
// "return":ns,"result":"ok|exists|missing|failed|unknown|=<value>"}. "failed": refused for a reason
// that leaves everything as it was (no broker to place a replica on...). An operation whose outcome
// is not known (a timeout, a connection lost after the request left) has result "unknown" and no
// return: it may have taken effect at any point after its call, or never. A read answers
// "missing" or "=" and the value.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

type record struct {
	Client int    `json:"client"`
	Op     string `json:"op"`
	Key    string `json:"key"`
	Value  string `json:"value"`
	Call   int64  `json:"call"`
	Return *int64 `json:"return"`
	Result string `json:"result"`
}

type input struct {
	op, key, value string
}

// state of one topic: absent, or present with a retention.ms ("" = not set)
type state struct {
	exists bool
	value  string
}

// step gives every state the operation may leave, given what it answered; none if it could not
// have answered that from s.
func step(s state, in input, out string) []state {
	if out == "failed" {
		return []state{s}
	}
	switch in.op {
	case "create":
		switch out {
		case "ok":
			if !s.exists {
				return []state{{exists: true}}
			}
		case "exists":
			if s.exists {
				return []state{s}
			}
		case "unknown":
			if s.exists {
				return []state{s}
			}
			return []state{s, {exists: true}}
		}
	case "delete":
		switch out {
		case "ok":
			if s.exists {
				return []state{{}}
			}
		case "missing":
			if !s.exists {
				return []state{s}
			}
		case "unknown":
			if s.exists {
				return []state{s, {}}
			}
			return []state{s}
		}
	case "set":
		switch out {
		case "ok":
			if s.exists {
				return []state{{exists: true, value: in.value}}
			}
		case "missing":
			if !s.exists {
				return []state{s}
			}
		case "unknown":
			if s.exists {
				return []state{s, {exists: true, value: in.value}}
			}
			return []state{s}
		}
	case "read":
		if out == "unknown" {
			return []state{s}
		}
		if (out == "missing" && !s.exists) || (s.exists && out == "="+s.value) {
			return []state{s}
		}
	}
	return nil
}

var model = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(input).key
			byKey[k] = append(byKey[k], op)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{state{}} },
	Step: func(s interface{}, in interface{}, out interface{}) []interface{} {
		next := step(s.(state), in.(input), out.(string))
		states := make([]interface{}, len(next))
		for i, n := range next {
			states[i] = n
		}
		return states
	},
	DescribeOperation: func(in interface{}, out interface{}) string {
		i := in.(input)
		if i.op == "set" {
			return fmt.Sprintf("set(%s, %s) -> %s", i.key, i.value, out)
		}
		return fmt.Sprintf("%s(%s) -> %s", i.op, i.key, out)
	},
	DescribeState: func(s interface{}) string {
		st := s.(state)
		if !st.exists {
			return "absent"
		}
		return "present, retention.ms=" + st.value
	},
}

func main() {
	html := flag.String("html", "", "where to write Porcupine's visualization of a history that is not linearizable")
	timeout := flag.Duration("timeout", 60*time.Second, "give up after this long")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: checker [-html FILE] [-timeout D] HISTORY.jsonl")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer f.Close()
	var history []porcupine.Operation
	keys := map[string]bool{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; scanner.Scan(); line++ {
		var r record
		if err := json.Unmarshal(scanner.Bytes(), &r); err != nil {
			fmt.Fprintf(os.Stderr, "%s:%d: %v\n", flag.Arg(0), line, err)
			os.Exit(2)
		}
		ret := int64(math.MaxInt64) // not known to have ended: concurrent with everything after its call
		if r.Return != nil && r.Result != "unknown" {
			ret = *r.Return
		}
		history = append(history, porcupine.Operation{ClientId: r.Client, Input: input{r.Op, r.Key, r.Value},
			Call: r.Call, Output: r.Result, Return: ret})
		keys[r.Key] = true
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	result, info := porcupine.CheckOperationsVerbose(model.ToModel(), history, *timeout)
	switch result {
	case porcupine.Ok:
		fmt.Printf("linearizable: %d operations on %d keys\n", len(history), len(keys))
	case porcupine.Illegal:
		fmt.Printf("NOT linearizable: %d operations on %d keys\n", len(history), len(keys))
		if *html != "" {
			if out, err := os.Create(*html); err == nil {
				porcupine.Visualize(model.ToModel(), info, out)
				out.Close()
				fmt.Printf("visualization: %s\n", *html)
			}
		}
		os.Exit(1)
	default:
		fmt.Printf("unknown: the check of %d operations timed out after %s\n", len(history), *timeout)
		os.Exit(3)
	}
}
