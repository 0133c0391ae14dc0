package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered pair of migrations.
type Migration struct {
	Version  int
	Name     string
	Up, Down string
}

// Load returns the migrations in dir of fsys in version order. Every version needs
// both an .up.sql and a .down.sql file.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		name := e.Name()
		base, direction, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), ".")
		num, label, ok2 := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || !ok2 || err != nil || len(num) != 3 || (direction != "up" && direction != "down") {
			return nil, fmt.Errorf("migration %s: want NNN_name.up.sql or NNN_name.down.sql", name)
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		m := byVersion[version]
		if m == nil {
			m = &Migration{Version: version, Name: label}
			byVersion[version] = m
		}
		if m.Name != label {
			return nil, fmt.Errorf("migration %03d: two names, %s and %s", version, m.Name, label)
		}
		if direction == "up" {
			m.Up = string(body)
		} else {
			m.Down = string(body)
		}
	}
	all := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %s needs both .up.sql and .down.sql", m)
		}
		all = append(all, *m)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Version < all[j].Version })
	return all, nil
}

func (m *Migration) String() string { return fmt.Sprintf("%03d_%s", m.Version, m.Name) }
