package kvcompactbench

import (
	"errors"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// profiles are the optional CPU profile and execution trace of one of
// cpu-par's runs (the second of the first job: the engine's arrays are
// then kept from the job before, as in a store's steady state): started
// right before it and stopped right after, so that they hold the engine's
// work and not the baselines' or the job building.
type profiles struct {
	cpu, trace         string
	all                bool // every run after the first, of every engine (labelled)
	cpuFile, traceFile *os.File
	done               bool
}

// start starts them before a cpu-par run, if they are wanted and not taken
// yet.
func (p *profiles) start() error {
	if p.done || p.cpu == "" && p.trace == "" || p.cpuFile != nil || p.traceFile != nil {
		return nil
	}
	var err error
	if p.cpu != "" {
		if p.cpuFile, err = os.Create(p.cpu); err == nil {
			err = pprof.StartCPUProfile(p.cpuFile)
		}
	}
	if err == nil && p.trace != "" {
		if p.traceFile, err = os.Create(p.trace); err == nil {
			err = trace.Start(p.traceFile)
		}
	}
	if err != nil {
		p.stop()
	}
	return err
}

// stop ends and writes them (once).
func (p *profiles) stop() error {
	if p.done || p.cpuFile == nil && p.traceFile == nil {
		return nil
	}
	p.done = true
	var errs []error
	if p.cpuFile != nil {
		pprof.StopCPUProfile()
		errs = append(errs, p.cpuFile.Close())
	}
	if p.traceFile != nil {
		trace.Stop()
		errs = append(errs, p.traceFile.Close())
	}
	return errors.Join(errs...)
}
