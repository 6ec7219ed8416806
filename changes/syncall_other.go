//go:build !linux

package changes

// syncAll syncs each file and its directory: there is no syncfs here.
func syncAll(_ string, files []string) error { return syncEach(files) }
