package testenv

// HistogramCount sums the sample counts of the named histogram's series in
// this process's controller-runtime registry whose labels include every one
// of labels: how many observations were made.
func HistogramCount(name string, labels map[string]string) (uint64, error) {
	samples, err := metricSamples(name, labels)
	var n uint64
	for _, m := range samples {
		n += m.GetHistogram().GetSampleCount()
	}
	return n, err
}
