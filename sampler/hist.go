package sampler

// pauseHist keeps ptrace pauses in fixed buckets (flat memory over any
// run length): 1 µs wide to 100 µs, 100 µs wide to 10 ms, 10 ms wide to 1 s.
type pauseHist struct {
	b     [100 + 99 + 100]int64
	n     int64
	maxNS int64
}

func (h *pauseHist) add(ns int64) {
	us := ns / 1000
	var i int64
	switch {
	case us < 100:
		i = us
	case us < 10000:
		i = 100 + (us-100)/100
	default:
		i = 199 + (us-10000)/10000
		if i >= int64(len(h.b)) {
			i = int64(len(h.b)) - 1
		}
	}
	h.b[i]++
	h.n++
	if ns > h.maxNS {
		h.maxNS = ns
	}
}

func bucketUpperUS(i int) float64 {
	switch {
	case i < 100:
		return float64(i + 1)
	case i < 199:
		return float64(100 + (i-100+1)*100)
	default:
		return float64(10000 + (i-199+1)*10000)
	}
}

// quantile returns an upper bound (bucket edge) of the q-quantile in µs.
func (h *pauseHist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	want := int64(q*float64(h.n-1)) + 1
	var acc int64
	for i, c := range h.b {
		acc += c
		if acc >= want {
			v := bucketUpperUS(i)
			if m := float64(h.maxNS) / 1000; v > m {
				v = m
			}
			return v
		}
	}
	return float64(h.maxNS) / 1000
}
