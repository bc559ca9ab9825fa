package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestSetMemoryLimitFollowsTheContainersLimit(t *testing.T) {
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const mib = 1 << 20
	for name, tc := range map[string]struct {
		files []string
		env   string
		want  int64
	}{
		"cgroup v2, 256 MiB":  {files: []string{file("v2", "268435456\n")}, want: 256 * mib * 9 / 10},
		"cgroup v2, no limit": {files: []string{file("v2max", "max\n")}},
		"cgroup v1, 128 MiB":  {files: []string{filepath.Join(dir, "absent"), file("v1", "134217728\n")}, want: 128 * mib * 9 / 10},
		"cgroup v1, no limit": {files: []string{file("v1max", "9223372036854771712\n")}},
		"no cgroup files":     {files: []string{filepath.Join(dir, "absent")}},
		"GOMEMLIMIT set":      {files: []string{file("v2set", "268435456\n")}, env: "100MiB"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.env)
			debug.SetMemoryLimit(math.MaxInt64)
			got, err := setMemoryLimit(tc.files)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("limit set %d, want %d", got, tc.want)
			}
			if tc.want > 0 && debug.SetMemoryLimit(-1) != tc.want {
				t.Errorf("runtime limit %d, want %d", debug.SetMemoryLimit(-1), tc.want)
			}
		})
	}
}
