package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3".
var version string

// buildVersion is the -X version, else the module version, else "dev".
func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the tollctl version",
		Long: `Print the version of this tollctl binary and the Go toolchain it was built
with. It does not contact the gateway.`,
		Example: `  tollctl version
  tollctl version -o json`,
		Args: exactArgs(),
		RunE: a.action(func(*cobra.Command, []string) error {
			platform := runtime.GOOS + "/" + runtime.GOARCH
			if a.jsonOutput() {
				raw, err := json.Marshal(map[string]string{
					"version": buildVersion(), "go_version": runtime.Version(), "platform": platform,
				})
				if err != nil {
					return err
				}
				return writeJSON(a.stdout, raw)
			}
			fmt.Fprintf(a.stdout, "tollctl %s (%s, %s)\n", buildVersion(), runtime.Version(), platform)
			return nil
		}),
	}
}
