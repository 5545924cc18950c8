package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// PromptDir is a directory of .prompt files loaded into a registry, as Genkit's LoadPromptDir
// (JS: promptDir) loads them: "name.prompt" is /prompt/name, and in a subdirectory sub,
// /prompt/sub/name as Genkit JS names it; "name.variant.prompt" is /prompt/name.variant;
// "_name.prompt", in any subdirectory, is the partial {{> name}}. Reload loads it again when a file changed.
//
// A file that does not load is not dropped silently and does not stop the others: its prompt is
// registered as a stand-in that lists with the error (file:line, in its description and in
// metadata.prompt.loadError) and fails FAILED_PRECONDITION when run, until the file is fixed.
// The file on disk is what runs; a last good version is not kept.
type PromptDir struct {
	r   *Registry
	dir string

	mu sync.Mutex
	// stamps are the size and modification time of each file, by path, as last loaded.
	stamps map[string]fileStamp
	// keys are the registry keys this directory holds, each with the file it was loaded from.
	keys map[string]string
	// partials are the directory's partials by name, as last loaded, for Parse.
	partials map[string]string
	errs     []*PromptFileError
}

type fileStamp struct {
	size int64
	mod  time.Time
}

// LoadPromptDir loads the .prompt files under dir into r. The error joins the files that did not
// load (each a *PromptFileError); their prompts are registered as stand-ins holding the error. A
// directory that cannot be read is an error and loads nothing.
func LoadPromptDir(r *Registry, dir string) (*PromptDir, error) {
	d := &PromptDir{r: r, dir: dir, keys: map[string]string{}}
	if _, err := d.load(true); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.promptDirs = append(r.promptDirs, d)
	r.mu.Unlock()
	return d, d.Err()
}

// PromptDirs are the prompt directories loaded into the registry, for a dev server to watch.
func (r *Registry) PromptDirs() []*PromptDir {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.promptDirs)
}

// Dir is the directory's path as given.
func (d *PromptDir) Dir() string { return d.dir }

// Errors are the files that did not load at the last load.
func (d *PromptDir) Errors() []*PromptFileError {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.errs)
}

// Err joins Errors, or is nil.
func (d *PromptDir) Err() error {
	errs := d.Errors()
	if len(errs) == 0 {
		return nil
	}
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}

// Reload loads the directory again if a file was added, removed or changed (by size or
// modification time) since the last load, and says whether it did. Prompts whose files are gone
// leave the registry.
func (d *PromptDir) Reload() (bool, error) {
	return d.load(false)
}

// promptFile is a .prompt file found under the directory.
type promptFile struct {
	path  string
	name  string // the prompt's or partial's name
	stamp fileStamp
}

// scan lists the directory's prompt files and partials.
func (d *PromptDir) scan() (prompts, partials []promptFile, err error) {
	err = filepath.WalkDir(d.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".prompt") {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		f := promptFile{path: path, stamp: fileStamp{size: info.Size(), mod: info.ModTime()}}
		if name, ok := strings.CutPrefix(e.Name(), "_"); ok {
			f.name = strings.TrimSuffix(name, ".prompt")
			partials = append(partials, f)
			return nil
		}
		rel, err := filepath.Rel(d.dir, path)
		if err != nil {
			return err
		}
		f.name = strings.TrimSuffix(filepath.ToSlash(rel), ".prompt")
		prompts = append(prompts, f)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("load prompt directory %s: %w", d.dir, err)
	}
	return prompts, partials, nil
}

// load reads every file when force is set or any file changed, and swaps the directory's
// actions in the registry.
func (d *PromptDir) load(force bool) (bool, error) {
	prompts, partials, err := d.scan()
	if err != nil {
		return false, err
	}
	stamps := make(map[string]fileStamp, len(prompts)+len(partials))
	for _, f := range append(slices.Clone(prompts), partials...) {
		stamps[f.path] = f.stamp
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !force && sameStamps(d.stamps, stamps) {
		return false, nil
	}

	var errs []*PromptFileError
	parts := make(map[string]string, len(partials))
	for _, f := range partials {
		src, err := os.ReadFile(f.path)
		if err != nil {
			errs = append(errs, &PromptFileError{File: f.path, Err: err})
			continue
		}
		parts[f.name] = string(src)
	}
	// Files parse in parallel: a load of 500 files is well under a second (BENCHMARKS.md).
	loaded := make([]*FilePrompt, len(prompts))
	ferrs := make([]*PromptFileError, len(prompts))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(runtime.GOMAXPROCS(0), len(prompts)) {
		wg.Go(func() {
			for i := range next {
				f := prompts[i]
				src, err := os.ReadFile(f.path)
				if err == nil {
					loaded[i], err = parsePromptFile(d.r, f.path, f.name, string(src), parts)
				}
				if err != nil {
					if !errors.As(err, &ferrs[i]) {
						ferrs[i] = &PromptFileError{File: f.path, Err: err}
					}
					loaded[i] = brokenPrompt(d.r, f.name, ferrs[i])
				}
			}
		})
	}
	for i := range prompts {
		next <- i
	}
	close(next)
	wg.Wait()

	add := make([]Action, 0, len(prompts))
	keys := make(map[string]string, len(prompts))
	for i, f := range prompts {
		key := ActionKey(ActionTypePrompt, f.name)
		if _, ok := keys[key]; ok {
			errs = append(errs, &PromptFileError{File: f.path, Err: fmt.Errorf("%s is loaded from another file of the directory", key)})
			continue
		}
		if _, ok := d.keys[key]; !ok && d.r.Lookup(key) != nil {
			errs = append(errs, &PromptFileError{File: f.path, Err: fmt.Errorf("%s is already registered", key)})
			continue
		}
		if ferrs[i] != nil {
			errs = append(errs, ferrs[i])
		}
		keys[key] = f.path
		add = append(add, loaded[i])
	}
	var gone []string
	owned := make(map[string]bool, len(d.keys))
	for k := range d.keys {
		owned[k] = true
		if _, ok := keys[k]; !ok {
			gone = append(gone, k)
		}
	}
	if err := d.r.swap(gone, add, owned); err != nil {
		return false, fmt.Errorf("load prompt directory %s: %w", d.dir, err)
	}
	d.keys, d.stamps, d.errs, d.partials = keys, stamps, errs, parts
	return true, nil
}

// File is the path of the file the directory loaded the prompt key (/prompt/name) from, found
// by the key alone: a caller that writes a prompt back never takes a path from elsewhere.
func (d *PromptDir) File(key string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	path, ok := d.keys[key]
	return path, ok
}

// Parse compiles source as the directory's prompt key would be compiled from its file, with the
// directory's partials as last loaded, without registering it: a playground renders and runs an
// edit before it is saved. A source that does not compile is a *PromptFileError naming the line.
func (d *PromptDir) Parse(key, source string) (*FilePrompt, error) {
	d.mu.Lock()
	file, ok := d.keys[key]
	parts := d.partials
	d.mu.Unlock()
	if !ok {
		return nil, Errorf(StatusNotFound, "%s is not a prompt of %s", key, d.dir)
	}
	name := strings.TrimPrefix(key, "/"+string(ActionTypePrompt)+"/")
	return parsePromptFile(d.r, file, name, source, parts)
}

func sameStamps(a, b map[string]fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.size != w.size || !v.mod.Equal(w.mod) {
			return false
		}
	}
	return true
}
