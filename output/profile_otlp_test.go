package output

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"stackshot/internal/testutil"
)

// otlpRoundTrip converts the fixture and reads it back from the protobuf
// wire form, as a collector would.
func otlpRoundTrip(t *testing.T, p *Profile, o OTLPOptions) pprofile.Profiles {
	t.Helper()
	pd, err := ToOTLP(p, o)
	if err != nil {
		t.Fatal(err)
	}
	var u pprofile.ProtoUnmarshaler
	got, err := u.UnmarshalProfiles(pd.Encode())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func strAttr(t *testing.T, m pcommon.Map, k string) string {
	t.Helper()
	v, ok := m.Get(k)
	if !ok {
		return "<absent>"
	}
	return v.AsString()
}

func TestOTLPFixture(t *testing.T) {
	pd := otlpRoundTrip(t, fixtureProfile(), OTLPOptions{Host: "web-7", Version: "v1.2"})
	dict := pd.Dictionary()
	str := func(i int32) string { return dict.StringTable().At(int(i)) }
	if pd.ResourceProfiles().Len() != 2 {
		t.Fatalf("%d resources, want one per process (2)", pd.ResourceProfiles().Len())
	}
	wantRes := []map[string]string{
		{"host.name": "web-7", "process.pid": "4242", "service.name": "myserver", "process.executable.name": "myserver",
			"process.executable.path": fxExe, "process.executable.build_id.gnu": fxExeID},
		{"host.name": "web-7", "process.pid": "5151", "service.name": "batch;job", "process.executable.name": "batch",
			"process.executable.path": fxBatch, "process.executable.build_id.gnu": fxBatchID},
	}
	// Stacks and their values in each sample type, from the fixture by hand.
	wantStacks := []map[string]int64{
		{
			"clear_page_erms <- asm_exc_page_fault <- hot_a_inner <- hot_a <- " + fxOperator + " <- main <- __libc_start_call_main": 60,
			"hot_a_inner <- hot_a <- " + fxOperator + " <- main <- __libc_start_call_main":                                          40,
			"hot_b <- main <- __libc_start_call_main":                                                                               27,
			"libfoo.so.1+0x4567 <- libfoo.so.1+0x4a10 <- weird;name with newline <- main <- __libc_start_call_main":                 5,
			"futex_wait_queue <- do_futex <- __futex_abstimed_wait_common <- main <- __libc_start_call_main":                        10,
		},
		{
			"crunch <- main <- __libc_start_call_main":              15,
			"[unknown] <- crunch <- main <- __libc_start_call_main": 4,
			"0xffffffff81000123 <- [unknown]":                       3,
		},
	}
	for ri, rp := range pd.ResourceProfiles().All() {
		at := rp.Resource().Attributes()
		for k, v := range wantRes[ri] {
			if got := strAttr(t, at, k); got != v {
				t.Errorf("resource %d: %s = %q, want %q", ri, k, got, v)
			}
		}
		if rp.ScopeProfiles().Len() != 1 {
			t.Fatalf("resource %d: %d scopes", ri, rp.ScopeProfiles().Len())
		}
		sp := rp.ScopeProfiles().At(0)
		if sp.Scope().Name() != "stackshot" || sp.Scope().Version() != "v1.2" {
			t.Errorf("scope %q %q", sp.Scope().Name(), sp.Scope().Version())
		}
		if sp.Profiles().Len() != 2 {
			t.Fatalf("resource %d: %d profiles, want one per pprof sample type (2)", ri, sp.Profiles().Len())
		}
		for pi, prof := range sp.Profiles().All() {
			typ, unit := str(prof.SampleType().TypeStrindex()), str(prof.SampleType().UnitStrindex())
			wantTyp := [][2]string{{"samples", "count"}, {"cpu", "nanoseconds"}}[pi]
			if typ != wantTyp[0] || unit != wantTyp[1] {
				t.Errorf("profile %d: sample type %s/%s, want %v", pi, typ, unit, wantTyp)
			}
			if str(prof.PeriodType().TypeStrindex()) != "cpu" || str(prof.PeriodType().UnitStrindex()) != "nanoseconds" || prof.Period() != 10101010 {
				t.Errorf("period %d", prof.Period())
			}
			if prof.DurationNano() != 10e9 || prof.Time().AsTime().Unix() != fixtureProfile().Start.Unix() {
				t.Errorf("time %v duration %d", prof.Time(), prof.DurationNano())
			}
			got, err := testutil.OTLPStacks(dict, prof)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range wantStacks[ri] {
				if pi == 1 {
					v = cpuNanos(v, 99)
				}
				// cpu values are per pprof sample, summed: allow the
				// rounding of summing two (samples 2 and 3).
				if g := got[k]; g != v && !(pi == 1 && g-v <= 1 && v-g <= 1) {
					t.Errorf("resource %d profile %d: stack %q = %d, want %d", ri, pi, k, g, v)
				}
			}
			if len(got) != len(wantStacks[ri]) {
				t.Errorf("resource %d profile %d: %d stacks, want %d: %v", ri, pi, len(got), len(wantStacks[ri]), got)
			}
		}
	}

	// Mappings carry their file and build id.
	ids := map[string]string{}
	for _, m := range dict.MappingTable().All() {
		for _, ai := range m.AttributeIndices().All() {
			kv := dict.AttributeTable().At(int(ai))
			if str(kv.KeyStrindex()) == "process.executable.build_id.gnu" {
				ids[str(m.FilenameStrindex())] = kv.Value().AsString()
			}
		}
	}
	for file, id := range map[string]string{fxExe: fxExeID, fxLibc: fxLibcID, fxLibfoo: fxLibfooID, fxBatch: fxBatchID} {
		if ids[file] != id {
			t.Errorf("mapping %s: build id %q, want %q", file, ids[file], id)
		}
	}

	// A sample's thread attributes.
	prof := pd.ResourceProfiles().At(1).ScopeProfiles().At(0).Profiles().At(0)
	seen := map[string]bool{}
	for _, s := range prof.Samples().All() {
		var name string
		var tid int64
		for _, ai := range s.AttributeIndices().All() {
			kv := dict.AttributeTable().At(int(ai))
			switch str(kv.KeyStrindex()) {
			case "thread.name":
				name = kv.Value().Str()
			case "thread.id":
				tid = kv.Value().Int()
			}
		}
		seen[name+"/"+pcommon.NewValueInt(tid).AsString()] = true
	}
	if !seen["batch;job/5151"] || !seen["jit<&>/5152"] || len(seen) != 2 {
		t.Errorf("thread attributes %v", seen)
	}
}

// TestOTLPService: --service names every resource; an empty profile still
// converts (a resource per process, no samples).
func TestOTLPService(t *testing.T) {
	p := fixtureProfile()
	p.Samples = nil
	pd := otlpRoundTrip(t, p, OTLPOptions{Service: "checkout"})
	for _, rp := range pd.ResourceProfiles().All() {
		if got := strAttr(t, rp.Resource().Attributes(), "service.name"); got != "checkout" {
			t.Errorf("service.name %q", got)
		}
		if got := strAttr(t, rp.Resource().Attributes(), "host.name"); got != "<absent>" {
			t.Errorf("host.name %q without a host", got)
		}
	}
	if pd.SampleCount() != 0 || pd.ResourceProfiles().Len() != 2 {
		t.Errorf("%d samples in %d resources", pd.SampleCount(), pd.ResourceProfiles().Len())
	}
	p.FreqHz = 0
	if _, err := ToOTLP(p, OTLPOptions{}); err == nil {
		t.Error("a profile without a frequency converted")
	}
}
