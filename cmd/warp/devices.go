package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/warpkit/warpkit/cuda"
	"github.com/warpkit/warpkit/internal/cli"
)

func init() {
	register(&command{name: "devices", summary: "list CUDA devices; --selftest checks and measures them", run: runDevices})
}

func runDevices(args []string) error {
	fs := cli.NewFlags("devices", "[--selftest] [--json]")
	selftest := fs.Bool("selftest", false, "run the self-test kernels on each device and measure copy bandwidth")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := cli.NoArgs(fs); err != nil {
		return err
	}
	devs, err := cuda.Devices()
	if errors.Is(err, cuda.ErrNoDevice) {
		if *asJSON {
			return json.NewEncoder(os.Stdout).Encode(map[string]any{"devices": []any{}, "reason": err.Error()})
		}
		fmt.Println("no CUDA device found; the CPU backend will be used")
		fmt.Printf("(%v)\n", err)
		return nil
	}
	if err != nil {
		return err
	}
	var reports []cuda.SelfTestReport
	if *selftest {
		for _, p := range devs {
			rep, err := selfTestDevice(p.Ordinal)
			if err != nil {
				return fmt.Errorf("device %d: %w", p.Ordinal, err)
			}
			reports = append(reports, rep)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"devices": devs, "selftest": reports})
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tname\tcc\tSMs\tmemory\tL2\tbus\tmem clock\tpeak bandwidth\tdriver")
	for _, p := range devs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%.1f GiB\t%d MiB\t%d bit\t%d MHz\t%.0f GB/s\tCUDA %s\n",
			p.Ordinal, p.Name, p.ComputeCapability(), p.Multiprocessors, float64(p.TotalMemory)/(1<<30),
			p.L2CacheBytes>>20, p.MemoryBusWidth, p.MemoryClockKHz/1000, p.TheoreticalBandwidth()/1e9, p.DriverVersionString())
	}
	tw.Flush()
	failed := false
	for _, r := range reports {
		fmt.Printf("\nself-test, device %d (%s):\n", r.Device.Ordinal, r.Device.Name)
		for _, c := range r.Checks {
			status := "ok  "
			if !c.OK {
				status = "FAIL"
				failed = true
			}
			fmt.Printf("  %s %-9s %s\n", status, c.Name, c.Detail)
		}
		best := r.BestBandwidth()
		fmt.Printf("  copy bandwidth (bytes read + written, %d MiB buffers):\n", r.CopyBytes>>20)
		fmt.Printf("    cuMemcpyDtoD  %7.0f GB/s\n    copy kernel   %7.0f GB/s\n    theoretical   %7.0f GB/s\n",
			r.MemcpyBandwidth/1e9, r.KernelCopyBandwidth/1e9, r.TheoreticalBandwidth/1e9)
		fmt.Printf("    best is %.0f%% of theoretical\n", 100*best/r.TheoreticalBandwidth)
	}
	if failed {
		return errors.New("self-test failed")
	}
	return nil
}

func selfTestDevice(ordinal int) (cuda.SelfTestReport, error) {
	d, err := cuda.Open(ordinal)
	if err != nil {
		return cuda.SelfTestReport{}, err
	}
	defer d.Close()
	return cuda.SelfTest(d, 0)
}
