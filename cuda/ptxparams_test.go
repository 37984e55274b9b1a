package cuda

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// ptxHead is the preamble nvcc writes, which makes a text PTX for the parser.
const ptxHead = ".version 7.8\n.target sm_70\n.address_size 64\n\n"

func TestParsePTXParams(t *testing.T) {
	cases := []struct {
		name string
		ptx  string
		want ptxParamTable
	}{
		{"selftest fill_u64 and saxpy", ptxHead + `
	// .globl	fill_u64

.visible .entry fill_u64(
	.param .u64 fill_u64_param_0,
	.param .u64 fill_u64_param_1,
	.param .u64 fill_u64_param_2
)
{
	.reg .pred 	%p<3>;
	.reg .b64 	%rd<16>;
	ld.param.u64 	%rd7, [fill_u64_param_0];
	ret;

}
	// .globl	saxpy
.visible .entry saxpy(
	.param .f32 saxpy_param_0,
	.param .u64 saxpy_param_1,
	.param .u64 saxpy_param_2,
	.param .u64 saxpy_param_3
)
{
	ret;
}
`, ptxParamTable{"fill_u64": {8, 8, 8}, "saxpy": {4, 8, 8, 8}}},
		{"selftest probe_args", ptxHead + `.visible .entry probe_args(
	.param .u32 probe_args_param_0,
	.param .u32 probe_args_param_1,
	.param .u64 probe_args_param_2,
	.param .u64 probe_args_param_3,
	.param .f32 probe_args_param_4,
	.param .f64 probe_args_param_5,
	.param .u8 probe_args_param_6,
	.param .u64 probe_args_param_7
)
{
	.reg .b16 	%rs<2>;
	ld.param.u8 	%rs1, [probe_args_param_6];
}
`, ptxParamTable{"probe_args": {4, 4, 8, 8, 4, 8, 1, 8}}},
		{"prim radix_upsweep_k32 with .maxntid", ptxHead + `.visible .entry radix_upsweep_k32(
	.param .u64 radix_upsweep_k32_param_0,
	.param .u32 radix_upsweep_k32_param_1,
	.param .u32 radix_upsweep_k32_param_2,
	.param .u32 radix_upsweep_k32_param_3,
	.param .u32 radix_upsweep_k32_param_4,
	.param .u64 radix_upsweep_k32_param_5
)
.maxntid 256, 1, 1
{
	.shared .align 4 .b8 _ZZ16radix_upsweep_k32E4hist[4096];
	{ // an inner scope
	.reg .b32 %r<2>;
	}
}
`, ptxParamTable{"radix_upsweep_k32": {8, 4, 4, 4, 4, 8}}},
		{"prim cub EmptyKernel, empty list", ptxHead + `	// .globl	_ZN3cub17CUB_101702_700_NS11EmptyKernelIvEEvv
.visible .entry _ZN3cub17CUB_101702_700_NS11EmptyKernelIvEEvv()
{


	ret;

}
`, ptxParamTable{"_ZN3cub17CUB_101702_700_NS11EmptyKernelIvEEvv": {}}},
		{"no list at all", ptxHead + ".entry bare\n{\n\tret;\n}\n", ptxParamTable{"bare": {}}},
		{"signed, 16-bit, b64", ptxHead + `.visible .entry k(.param .s32 a, .param .u16 b, .param .s8 c, .param .b64 d, .param .f16 e, .param .b32 f)
{ ret; }`, ptxParamTable{"k": {4, 2, 1, 8, 2, 4}}},
		{"struct by value and pointer attributes", ptxHead + `.visible .entry k(
	.param .align 8 .b8 k_param_0[16],
	.param .u64 .ptr .global .align 4 k_param_1,
	.param .u64 .ptr.const.align 16 k_param_2,
	.param .u32 k_param_3[3]
)
{ ret; }`, ptxParamTable{"k": {16, 8, 8, 12}}},
		{"comments, strings and .func are skipped", ptxHead + `.file 1 ".entry fake(.param .u8 x)"
// .visible .entry commented(.param .u32 a)
/* .entry blocked(
	.param .u32 a
) */
.func (.param .b32 func_retval0) helper(
	.param .b64 helper_param_0
)
{ ret; }
.global .align 4 .b8 table[8] = {1, 2, 3, 4, 5, 6, 7, 8};
.visible .entry real(
	.param .u64 real_param_0, // the output
	.param /* the count */ .u32 real_param_1
)
{ ret; }`, ptxParamTable{"real": {8, 4}}},
		{"braces in bodies' comments and strings", ptxHead + `.visible .entry a(.param .u32 a_param_0)
{
	// a comment with a brace }
	// and another one, right after it: }
	/* a block comment } */ / // a lone slash, then a comment }
	.reg .b32 %r<2>; /* } */ // }
	{ .reg .b32 %inner; }
}
.global .align 1 .b8 msg[4] = {123, 125, 0, 0}; // "{}"
.visible .entry b(.param .u64 b_param_0)
{
	ret;
}
`, ptxParamTable{"a": {4}, "b": {8}}},
		{"a declaration and its definition", ptxHead + `.extern .entry k(.param .u64 a);
.visible .entry k(.param .u64 a) { ret; }`, ptxParamTable{"k": {8}}},
		{"no kernels", ptxHead + ".global .align 8 .u64 counter;\n", ptxParamTable{}},
	}
	for _, c := range cases {
		got, err := parsePTXParams([]byte(c.ptx))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !maps.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParsePTXParamsRefuses(t *testing.T) {
	cases := []struct {
		name, ptx, want string
	}{
		{"unknown type", ptxHead + ".visible .entry k(.param .u7 a) { }", `unexpected ".u7"`},
		{"two types", ptxHead + ".visible .entry k(.param .u32 .u64 a) { }", `unexpected ".u64"`},
		{"no type", ptxHead + ".visible .entry k(.param a) { }", "has no type"},
		{"not .param", ptxHead + ".visible .entry k(.reg .u32 a) { }", "want .param"},
		{"missing comma", ptxHead + ".visible .entry k(.param .u32 a .param .u32 b) { }", "want ',' or ')'"},
		{"missing name", ptxHead + ".visible .entry k(.param .u32) { }", "where a parameter name belongs"},
		{"numeric name", ptxHead + ".visible .entry k(.param .u32 7) { }", "where a parameter name belongs"},
		{"entry without name", ptxHead + ".visible .entry (.param .u32 a) { }", "not a name"},
		{"bad array size", ptxHead + ".visible .entry k(.param .b8 a[x]) { }", "positive size"},
		{"unclosed array", ptxHead + ".visible .entry k(.param .b8 a[4) { }", "without ']'"},
		{"bad alignment", ptxHead + ".visible .entry k(.param .align 0 .b8 a[4]) { }", "positive size"},
		{".ptr before the type", ptxHead + ".visible .entry k(.param .ptr .u64 a) { }", `unexpected ".ptr"`},
		{"space without .ptr", ptxHead + ".visible .entry k(.param .u64 .global a) { }", `unexpected ".global"`},
		{"truncated list", ptxHead + ".visible .entry k(.param .u64 a,", "want .param"},
		{"truncated parameter", ptxHead + ".visible .entry k(.param .u64", "where a parameter name belongs"},
		{"unclosed body", ptxHead + ".visible .entry k(.param .u64 a) {", "unbalanced braces"},
		{"stray brace", ptxHead + "}\n", "unbalanced '}'"},
		{"unterminated comment", ptxHead + "/* .entry", "unterminated comment"},
		{"unterminated string", ptxHead + ".file 1 \"a.cu\n", "unterminated string"},
		{"conflicting declarations", ptxHead + ".extern .entry k(.param .u32 a);\n.entry k(.param .u64 a) { }", "declared twice"},
	}
	for _, c := range cases {
		got, err := parsePTXParams([]byte(c.ptx))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "PTX line") {
			t.Errorf("%s: got %v, %v; want an error containing %q", c.name, got, err, c.want)
		}
	}
	// Text without .version is not PTX: a cubin, or a test's stand-in.
	for _, img := range []string{"", "// Code generated for a test\n", "\x7fELF\x02\x01\x01", ".entry k(.param .u32 a) { }"} {
		if _, err := parsePTXParams([]byte(img)); !errors.Is(err, errNotPTX) {
			t.Errorf("%q: got %v, want errNotPTX", img, err)
		}
	}
}

// TestParseSelftestPTX reads the package's own embedded PTX.
func TestParseSelftestPTX(t *testing.T) {
	got, err := parsePTXParams(selftestPTX)
	if err != nil {
		t.Fatal(err)
	}
	want := ptxParamTable{
		"fill_u64":   {8, 8, 8},
		"copy_v4":    {8, 8, 8},
		"saxpy":      {4, 8, 8, 8},
		"probe_args": {4, 4, 8, 8, 4, 8, 1, 8},
		"add_u32":    {8, 4, 8},
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestParseRepositoryPTX parses every .ptx file in the repository (read from
// disk: the packages that embed them import this one) and compares each
// kernel's parameter sizes with a second, independent reading by regular
// expression of nvcc's usual layout.
func TestParseRepositoryPTX(t *testing.T) {
	var files []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && path != ".." {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // editors' and kernelgen's temporary files
		}
		if !d.IsDir() && strings.HasSuffix(path, ".ptx") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skip("no .ptx files under the repository root")
	}
	entryRE := regexp.MustCompile(`\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\)`)
	paramRE := regexp.MustCompile(`\.param\s+\.([a-z]+)(\d+)\s+[\w$]+\s*(,|$)`)
	kernels := 0
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parsePTXParams(src)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		want := ptxParamTable{}
		for _, m := range entryRE.FindAllSubmatch(src, -1) {
			sizes := []int{}
			for _, line := range strings.Split(strings.TrimSpace(string(m[2])), "\n") {
				if line = strings.TrimSpace(line); line == "" {
					continue
				}
				p := paramRE.FindStringSubmatch(line)
				if p == nil {
					t.Fatalf("%s: kernel %s: the test's reading does not know %q", path, m[1], line)
				}
				bits := map[string]int{"8": 8, "16": 16, "32": 32, "64": 64}[p[2]]
				sizes = append(sizes, bits/8)
			}
			want[string(m[1])] = sizes
		}
		if len(want) == 0 || !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("%s: parser and regular expression disagree:\n parser %v\n regexp %v", path, got, want)
		}
		kernels += len(got)
	}
	t.Logf("%d files, %d kernels", len(files), kernels)
}

// typedPTX declares one kernel taking (.u64, .u32), as a kernel(T* out, unsigned n) would.
const typedPTX = ptxHead + `	// .globl	typed_k
.visible .entry typed_k(
	.param .u64 typed_k_param_0,
	.param .u32 typed_k_param_1
)
{
	ret;
}
`

func TestLaunchChecksArguments(t *testing.T) {
	f := newFakeGPU()
	f.kernelArity["typed_k"] = 2
	d := openFake(t, f)
	m, err := d.LoadModule([]byte(typedPTX))
	if err != nil {
		t.Fatal(err)
	}
	k, err := m.Function("typed_k")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := k.Params(); !ok || !slices.Equal(p, []int{8, 4}) {
		t.Fatalf("Params: %v %v, want [8 4] true", p, ok)
	}
	buf, err := Alloc[uint32](d, 16)
	if err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name string
		args []any
		want []string // in the message
	}{
		{"narrow pointer", []any{uint32(0), uint32(16)}, []string{"typed_k", "argument 0 is uint32 (4 bytes)", "parameter 0 is 8 bytes"}},
		{"too few", []any{uint64(buf.Ptr())}, []string{"typed_k", "1 arguments", "2 parameters", "parameter 1 (4 bytes) has none"}},
		{"too many", []any{uint64(buf.Ptr()), uint32(16), uint32(1)}, []string{"typed_k", "3 arguments", "argument 2 (uint32, 4 bytes) has no parameter"}},
		{"wide count", []any{buf, uint64(16)}, []string{"typed_k", "argument 1 is uint64 (8 bytes)", "parameter 1 is 4 bytes"}},
		{"bool for a count", []any{buf, true}, []string{"argument 1 is bool (1 bytes)", "parameter 1 is 4 bytes"}},
		{"none", nil, []string{"0 arguments", "parameter 0 (8 bytes) has none"}},
	}
	for _, c := range bad {
		err := k.Launch(D1(1), D1(32), 0, nil, c.args...)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: got %v, want ErrInvalidArgument", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
	}
	if len(f.launches) != 0 {
		t.Fatalf("refused launches reached the driver: %+v", f.launches)
	}
	for _, good := range [][]any{{buf, uint32(16)}, {buf.Ptr(), int32(16)}, {nil, float32(0)}, {buf.Sub(4, 8), uint32(4)}} {
		if err := k.Launch(D1(1), D1(32), 0, nil, good...); err != nil {
			t.Errorf("%T, %T: %v", good[0], good[1], err)
		}
	}
	if len(f.launches) != 4 {
		t.Fatalf("%d launches reached the driver, want 4", len(f.launches))
	}
	if l := f.launches[0]; l.kernel != "typed_k" || l.args[0] != uint64(buf.Ptr()) || l.args[1] != 16 {
		t.Fatalf("launch %+v", l)
	}
	// Unsupported types and freed buffers still get packArgs' own errors.
	if err := k.Launch(D1(1), D1(32), 0, nil, buf, 16); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "unsupported type int") {
		t.Errorf("int argument: %v", err)
	}
	freed, _ := Alloc[uint32](d, 4)
	freed.Free()
	if err := k.Launch(D1(1), D1(32), 0, nil, freed, uint32(4)); !errors.Is(err, ErrClosed) {
		t.Errorf("freed buffer: %v", err)
	}
}

// TestLaunchUncheckedWithoutPTXParams loads images whose parameters cannot be
// known: their kernels launch unchecked, as before.
func TestLaunchUncheckedWithoutPTXParams(t *testing.T) {
	f := newFakeGPU()
	f.kernelArity["typed_k"] = 2
	d := openFake(t, f)
	images := []struct {
		name, image string
		errPart     string
	}{
		{"not PTX text", "// Code generated for a test; no .version\n", "not PTX text"},
		{"unknown parameter type", ptxHead + ".visible .entry typed_k(.param .u64 a, .param .q32 b) { ret; }", `unexpected ".q32"`},
		{"kernel not declared", ptxHead + ".visible .entry other(.param .u64 a) { ret; }", ""},
	}
	for _, img := range images {
		m, err := d.LoadModule([]byte(img.image))
		if err != nil {
			t.Fatalf("%s: %v", img.name, err)
		}
		if img.errPart != "" && (m.paramsErr == nil || !strings.Contains(m.paramsErr.Error(), img.errPart)) {
			t.Errorf("%s: module's parse error %v, want one containing %q", img.name, m.paramsErr, img.errPart)
		}
		k, err := m.Function("typed_k")
		if err != nil {
			t.Fatalf("%s: %v", img.name, err)
		}
		if p, ok := k.Params(); ok {
			t.Errorf("%s: Params %v, true; want unknown", img.name, p)
		}
		if err := k.Launch(D1(1), D1(32), 0, nil, uint32(1), uint32(2)); err != nil {
			t.Errorf("%s: unchecked launch: %v", img.name, err)
		}
	}
}

// TestSelftestKernelsChecked makes sure the package's own kernels carry their
// parameter lists, so Fill and the self-test launch checked.
func TestSelftestKernelsChecked(t *testing.T) {
	f := newFakeGPU()
	d := openFake(t, f)
	for _, name := range []string{"fill_u64", "copy_v4", "probe_args"} {
		k, err := builtinKernel(d.st, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := k.Params(); !ok {
			t.Errorf("%s: parameters unknown", name)
		}
	}
	s, err := Alloc[uint64](d, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := Fill(s, 0x0123456789abcdef, nil); err != nil {
		t.Fatalf("Fill through the checked fill_u64: %v", err)
	}
	k, _ := builtinKernel(d.st, "fill_u64")
	if err := k.Launch(D1(1), D1(32), 0, nil, s, uint32(1), uint64(100)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("fill_u64 with a 4-byte value: %v", err)
	}
}

// TestArgWidthMatchesPackArgs keeps argWidth's type list in step with
// packArgs': every type packArgs accepts has a width, every type it refuses
// has none.
func TestArgWidthMatchesPackArgs(t *testing.T) {
	s := Slice[uint32]{buf: &Buffer{ptr: 0x1000, freed: new(atomic.Bool)}, n: 1}
	want := map[int][]any{
		1: {true, false},
		4: {int32(-1), uint32(1), float32(1)},
		8: {int64(-1), uint64(1), float64(1), DevicePtr(0x10), s, s.buf, nil},
	}
	for w, args := range want {
		for _, a := range args {
			if _, _, err := packArgs([]any{a}); err != nil {
				t.Errorf("packArgs refuses %T: %v", a, err)
			}
			if got := argWidth(a); got != w {
				t.Errorf("argWidth(%T) = %d, want %d", a, got, w)
			}
		}
	}
	for _, a := range []any{int(1), uint(1), int8(1), uint16(1), "x", []byte{1}, struct{}{}} {
		if _, _, err := packArgs([]any{a}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("packArgs accepts %T", a)
		}
		if got := argWidth(a); got != 0 {
			t.Errorf("argWidth(%T) = %d, want 0", a, got)
		}
	}
}

// TestCheckArgsAllocatesNothing holds the check to the launch path's budget.
func TestCheckArgsAllocatesNothing(t *testing.T) {
	k := &Function{name: "k", params: []int{8, 4, 8, 8, 4, 8, 1, 8}, typed: true}
	s := Slice[uint64]{buf: &Buffer{ptr: 0x1000, freed: new(atomic.Bool)}, n: 1}
	args := []any{s, uint32(2), int64(-3), uint64(4), float32(0.5), float64(0.25), false, DevicePtr(8)}
	if n := testing.AllocsPerRun(100, func() {
		if err := k.checkArgs(args); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("checkArgs allocates %v times per call", n)
	}
}

// BenchmarkCheckArgs measures the argument check alone, for eight arguments.
func BenchmarkCheckArgs(b *testing.B) {
	k := &Function{name: "k", params: []int{8, 4, 8, 8, 4, 8, 1, 8}, typed: true}
	s := Slice[uint64]{buf: &Buffer{ptr: 0x1000, freed: new(atomic.Bool)}, n: 1}
	args := []any{s, uint32(2), int64(-3), uint64(4), float32(0.5), float64(0.25), false, DevicePtr(8)}
	b.ReportAllocs()
	for b.Loop() {
		if err := k.checkArgs(args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParsePTX measures the parse LoadModule adds, on the largest PTX
// file in the repository when it can be read (else the package's own).
func BenchmarkParsePTX(b *testing.B) {
	src := selftestPTX
	if data, err := os.ReadFile("../prim/ptx/prim.ptx"); err == nil {
		src = data
	}
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := parsePTXParams(src); err != nil {
			b.Fatal(err)
		}
	}
}
