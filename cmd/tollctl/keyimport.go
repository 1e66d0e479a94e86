package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// importLine is one line of a key import file (JSON Lines).
type importLine struct {
	ImportID    string            `json:"import_id"`
	Name        string            `json:"name"`
	Models      []string          `json:"models"`
	Team        string            `json:"team"`
	Budget      json.Number       `json:"budget"` // dollars
	Period      string            `json:"period"`
	RPM         int64             `json:"rpm"`
	TPM         int64             `json:"tpm"`
	MaxParallel int64             `json:"max_parallel"`
	ExpiresAt   string            `json:"expires_at"` // RFC 3339
	Meta        map[string]string `json:"meta"`
	Secret      string            `json:"secret"`
}

// importedKey is a parsed line with where it came from.
type importedKey struct {
	line     int
	importID string
	key      *tollgatev1.ImportedKey
}

// maxImportLine bounds one line of an import file.
const maxImportLine = 1 << 20

// parseImportLine turns one JSON line into a key; defaultID is the import
// id of lines that name none.
func parseImportLine(text []byte, defaultID string) (string, *tollgatev1.ImportedKey, error) {
	var l importLine
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&l); err != nil {
		return "", nil, err
	}
	if dec.More() {
		return "", nil, fmt.Errorf("more than one JSON value on the line")
	}
	if strings.TrimSpace(l.Name) == "" {
		return "", nil, fmt.Errorf(`"name" is required`)
	}
	k := &tollgatev1.ImportedKey{Name: l.Name, Models: cleanList(l.Models), TeamId: l.Team, Metadata: l.Meta, Secret: l.Secret}
	if l.Budget != "" {
		n, err := parseDollars(l.Budget.String())
		if err != nil || n <= 0 {
			return "", nil, fmt.Errorf(`"budget" %s: want a positive dollar amount`, l.Budget)
		}
		if !slices.Contains(periods, l.Period) {
			return "", nil, fmt.Errorf(`"budget" needs "period": one of %s`, strings.Join(periods, ", "))
		}
		k.Budget = &tollgatev1.Budget{LimitNanos: n, Period: l.Period}
	} else if l.Period != "" {
		return "", nil, fmt.Errorf(`"period" needs "budget"`)
	}
	if l.RPM < 0 || l.TPM < 0 || l.MaxParallel < 0 {
		return "", nil, fmt.Errorf("rate limits must not be negative")
	}
	if l.RPM|l.TPM|l.MaxParallel != 0 {
		k.Limits = &tollgatev1.RateLimits{Rpm: l.RPM, Tpm: l.TPM, MaxParallel: l.MaxParallel}
	}
	if l.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339, l.ExpiresAt)
		if err != nil {
			return "", nil, fmt.Errorf(`"expires_at": want an RFC 3339 time such as 2027-01-31T00:00:00Z`)
		}
		k.ExpiresAt = timestamppb.New(t)
	}
	id := l.ImportID
	if id == "" {
		id = defaultID
	}
	return id, k, nil
}

// readImport reads and checks a whole import file before anything is
// sent, so that a bad line stops the import with its line number.
func readImport(r io.Reader, defaultID string) ([]importedKey, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxImportLine)
	var (
		out  []importedKey
		errs []string
		seen = map[[2]string]int{}
	)
	for n := 1; sc.Scan(); n++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		id, k, err := parseImportLine(text, defaultID)
		if err == nil {
			if first, dup := seen[[2]string{id, k.GetName()}]; dup {
				err = fmt.Errorf("name %q is also on line %d: a name identifies a key within an import", k.GetName(), first)
			}
		}
		if err != nil {
			if errs = append(errs, fmt.Sprintf("line %d: %v", n, err)); len(errs) == 20 {
				errs = append(errs, "(stopped after 20 bad lines)")
				break
			}
			continue
		}
		seen[[2]string{id, k.GetName()}] = n
		out = append(out, importedKey{line: n, importID: id, key: k})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read import file: %v", err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("nothing imported; fix these lines:\n  %s", strings.Join(errs, "\n  "))
	}
	return out, nil
}

// importBatches splits keys into runs of at most size keys of one import id.
func importBatches(keys []importedKey, size int) [][]importedKey {
	var out [][]importedKey
	for len(keys) > 0 {
		n := 1
		for n < len(keys) && n < size && keys[n].importID == keys[0].importID {
			n++
		}
		out = append(out, keys[:n])
		keys = keys[n:]
	}
	return out
}

func (a *app) keyImportCommand() *cobra.Command {
	var (
		importID   string
		batch      int
		secretsOut string
	)
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Create many keys from a JSON Lines file",
		Long: `Create keys from FILE ("-" for standard input), one JSON object per line:

  {"name":"cust-1","models":["gpt-*"],"team":"team_3f2a9c","budget":"25","period":"month",
   "rpm":600,"tpm":100000,"max_parallel":8,"expires_at":"2027-01-31T00:00:00Z",
   "meta":{"tier":"free"},"secret":"sk-...","import_id":"crm-2026-12"}

Only "name" is required. "secret" keeps a key's existing secret (a key
migrated from another gateway keeps working unchanged); without it the
gateway draws one, and the new secrets are written to --secrets-out (a file
created with mode 0600), which is then required.

A key is identified by its import id ("import_id" on the line, else
--import-id, else the file's name) and its name: running the same import
again skips the keys it already made, so an interrupted import is finished
by running it again. The whole file is checked first and nothing is sent if
a line is bad; keys then go in batches of --batch keys, each one replicated
write that is applied whole or not at all. Blank lines and lines starting
with # are skipped.`,
		Example: `  tollctl key import customers.jsonl --secrets-out new-secrets.jsonl
  tollctl key import migrated.jsonl --import-id litellm-2026-12 -o json   # {"imported":N,"skipped":M}`,
		Args: exactArgs("FILE"),
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if batch < 1 || batch > 5000 {
				return usageErrorf("--batch must be 1 to 5000")
			}
			return a.importKeys(cmd, args[0], importID, batch, secretsOut)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&importID, "import-id", "", `import id of lines without "import_id" (default: the file's name)`)
	f.IntVar(&batch, "batch", 2000, "keys per replicated write (1 to 5000)")
	f.StringVar(&secretsOut, "secrets-out", "", "write the secrets drawn for keys without one to this file (JSON Lines, mode 0600)")
	return cmd
}

func (a *app) importKeys(cmd *cobra.Command, file, importID string, batch int, secretsOut string) error {
	in := io.Reader(a.stdin)
	if file != "-" {
		fh, err := os.Open(file)
		if err != nil {
			return err
		}
		defer fh.Close()
		in = fh
		if importID == "" {
			importID = filepath.Base(file)
		}
	}
	if importID == "" {
		importID = "stdin"
	}
	keys, err := readImport(in, importID)
	if err != nil {
		return err
	}
	var secrets io.Writer
	if slices.ContainsFunc(keys, func(k importedKey) bool { return k.key.GetSecret() == "" }) {
		if secretsOut == "" {
			return usageErrorf("some lines have no \"secret\": give --secrets-out FILE to receive the secrets drawn for them")
		}
		fh, err := os.OpenFile(secretsOut, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer fh.Close()
		w := bufio.NewWriter(fh)
		defer w.Flush()
		secrets = w
	}
	api, err := a.api()
	if err != nil {
		return err
	}
	progress := a.progressWriter()
	var imported, skipped int
	for _, b := range importBatches(keys, batch) {
		req := &tollgatev1.ImportKeysRequest{ImportId: b[0].importID, Keys: make([]*tollgatev1.ImportedKey, len(b))}
		for i, k := range b {
			req.Keys[i] = k.key
		}
		ctx, cancel := a.callContext(cmd)
		resp, err := api.keys.ImportKeys(ctx, req)
		cancel()
		if err != nil {
			return fmt.Errorf("lines %d to %d (not imported; %d keys imported before them, %d skipped): %s",
				b[0].line, b[len(b)-1].line, imported, skipped, a.describe(err))
		}
		for i, r := range resp.GetResults() {
			if r.GetSecret() != "" && secrets != nil {
				line, _ := json.Marshal(map[string]any{"line": b[i].line, "name": b[i].key.GetName(), "id": r.GetId(), "secret": r.GetSecret()})
				if _, err := fmt.Fprintf(secrets, "%s\n", line); err != nil {
					return fmt.Errorf("write --secrets-out: %v", err)
				}
			}
		}
		imported += int(resp.GetImported())
		skipped += int(resp.GetSkipped())
		if progress != nil {
			fmt.Fprintf(progress, "\rimported %d, skipped %d of %d keys", imported, skipped, len(keys))
		}
	}
	if progress != nil {
		fmt.Fprintln(progress)
	}
	if a.jsonOutput() {
		return writeJSON(a.stdout, json.RawMessage(fmt.Sprintf(`{"imported":%d,"skipped":%d}`, imported, skipped)))
	}
	_, err = fmt.Fprintf(a.stdout, "Imported %d keys, skipped %d already imported.\n", imported, skipped)
	return err
}

// progressWriter is where progress goes: standard error when it is a
// terminal, else nowhere.
func (a *app) progressWriter() io.Writer {
	f, ok := a.stderr.(*os.File)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return f
}
