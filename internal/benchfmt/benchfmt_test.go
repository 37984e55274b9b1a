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
