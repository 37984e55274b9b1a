package benchfmt

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestPrint(t *testing.T) {
	r := NewReport("hash", "Test GPU")
	tab := r.Table("find", "n", "rate (G/s)", "vs baseline")
	tab.Add(1<<22, 3.14159, 0.25)
	tab.Add(1<<24, 123.4, 12.34)
	r.Note("target missed: %s", "because")
	var text bytes.Buffer
	if err := r.Print(&text, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"device: Test GPU", "4194304", "3.14", "123", "12.3", "target missed: because"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := r.Print(&js, true); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Tables[0].Rows[1][1].(float64) != 123.4 {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
	defer func() {
		if recover() == nil {
			t.Error("a short row was accepted")
		}
	}()
	tab.Add(1)
}

func TestRate(t *testing.T) {
	if r := Rate(2e9, time.Second, 1e9); r != 2 {
		t.Fatalf("got %v", r)
	}
	if r := Rate(5, 0, 1); r != 0 {
		t.Fatalf("zero duration: %v", r)
	}
}

func TestStream(t *testing.T) {
	var live bytes.Buffer
	r := NewReport("btree", "Test GPU")
	r.Stream(&live)
	tab := r.Table("lookup", "keys", "G/s")
	tab.Add(1<<20, 1.5)
	if !strings.Contains(live.String(), "device: Test GPU") || !strings.Contains(live.String(), "1048576") || !strings.Contains(live.String(), "1.5") {
		t.Fatalf("row not written as it was added:\n%s", live.String())
	}
	r.Note("done")
	before := live.Len()
	var rest bytes.Buffer
	if err := r.Print(&rest, false); err != nil || rest.Len() != 0 || live.Len() != before {
		t.Fatalf("Print after streaming wrote %q", rest.String())
	}
	var js bytes.Buffer
	if err := r.Print(&js, true); err != nil || !strings.Contains(js.String(), `"lookup"`) {
		t.Fatalf("JSON after streaming: %v %s", err, js.String())
	}
}

func TestCommit(t *testing.T) {
	// Tests run in the package directory of a git checkout (CI clones one), so
	// some revision must be found; without git it may only say "unknown".
	c := Commit()
	if c == "" {
		t.Fatal("empty commit")
	}
	if c != "unknown" && len(strings.TrimSuffix(c, "+dirty")) != 12 {
		t.Fatalf("commit %q is not 12 hex digits", c)
	}
	if got := shortRev("0123456789abcdef", true); got != "0123456789ab+dirty" {
		t.Fatalf("shortRev: %q", got)
	}
}

func TestCells(t *testing.T) {
	if h := HMean([]float64{1, 4, 4}); h != 2 {
		t.Errorf("HMean(1, 4, 4) = %v", h)
	}
	if HMean(nil) != 0 || HMean([]float64{1, 0}) != 0 {
		t.Error("HMean of nothing or of a zero rate is not 0")
	}
	if Ratio(3, 2) != "1.50x" || Ratio(1, 0) != "-" {
		t.Errorf("Ratio: %q %q", Ratio(3, 2), Ratio(1, 0))
	}
	if YesNo(true) != "yes" || YesNo(false) != "NO" {
		t.Error("YesNo")
	}
	if Millis(1500*time.Microsecond) != 1.5 {
		t.Errorf("Millis: %v", Millis(1500*time.Microsecond))
	}
}

func TestMix32(t *testing.T) {
	// fmix32's values as MurmurHash3 defines them; the bench tables' keys depend on them.
	for in, want := range map[uint32]uint32{0: 0, 1: 0x514e28b7, 0xdeadbeef: 0x0de5c6a9} {
		if got := Mix32(in); got != want {
			t.Errorf("Mix32(%#x) = %#x, want %#x", in, got, want)
		}
	}
}
