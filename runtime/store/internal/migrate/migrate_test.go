package migrate

import (
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"m/002_more.up.sql":   {Data: []byte("B")},
		"m/002_more.down.sql": {Data: []byte("b")},
		"m/001_init.up.sql":   {Data: []byte("A")},
		"m/001_init.down.sql": {Data: []byte("a")},
	}
	all, err := Load(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].String() != "001_init" || all[0].Up != "A" || all[0].Down != "a" ||
		all[1].String() != "002_more" || all[1].Up != "B" {
		t.Fatalf("Load = %+v", all)
	}
}

func TestLoad_Errors(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"no down":    {"m/001_init.up.sql": {Data: []byte("A")}},
		"bad name":   {"m/init.up.sql": {Data: []byte("A")}},
		"short num":  {"m/1_init.up.sql": {Data: []byte("A")}, "m/1_init.down.sql": {Data: []byte("a")}},
		"bad dir":    {"m/001_init.sideways.sql": {Data: []byte("A")}},
		"two labels": {"m/001_a.up.sql": {Data: []byte("A")}, "m/001_b.down.sql": {Data: []byte("a")}},
	} {
		if _, err := Load(fsys, "m"); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
