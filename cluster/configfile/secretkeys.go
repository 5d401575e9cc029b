package configfile

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/cluster/internal/regularfile"
)

// MaxKeysFileSize is the largest secret_keys_file NodeSecretKeys reads, in
// bytes: a few lines of base64 need far less.
const MaxKeysFileSize = 64 << 10

// secretKeys reads the secret_keys list: base64 keys (standard encoding,
// as base64(1) writes it), each checked as cluster.CheckSecretKey checks
// it, none twice. Its errors never quote a value: it may be a key.
func (d *decoder) secretKeys(f field) [][]byte {
	v := f.value
	switch {
	case v.Kind == yaml.ScalarNode && v.ShortTag() == nullTag:
		return nil
	case v.Kind == yaml.ScalarNode:
		d.fail(v, f.name, fmt.Errorf("secret_keys must be a list of base64 keys, got %s; write one key as [KEY]", v.ShortTag()))
		return nil
	case v.Kind != yaml.SequenceNode:
		d.fail(v, f.name, fmt.Errorf("secret_keys must be a list of base64 keys, got %s", v.ShortTag()))
		return nil
	case len(v.Content) == 0:
		d.fail(f.key, f.name, errors.New("secret_keys is empty: list at least one key, or leave the field out"))
		return nil
	case len(v.Content) > cluster.MaxSecretKeys:
		d.fail(f.key, f.name, fmt.Errorf("secret_keys: %d keys, want at most %d (a rotation needs 2)",
			len(v.Content), cluster.MaxSecretKeys))
		return nil
	}
	out := make([][]byte, 0, len(v.Content))
	at := make([]int, 0, len(v.Content)) // the entry of each key in out
	for i, item := range v.Content {
		it := orSelf(resolve(item), item)
		name := fmt.Sprintf("secret_keys[%d]", i)
		if it.Kind != yaml.ScalarNode || it.ShortTag() == nullTag {
			d.fail(it, f.name, fmt.Errorf("%s must be a base64 string, got %s", name, it.ShortTag()))
			continue
		}
		k, err := decodeKey(name, it.Value, out, func(j int) string { return keyIndex(at[j]) })
		if err != nil {
			d.fail(it, f.name, err)
			continue
		}
		out, at = append(out, k), append(at, i)
	}
	return out
}

// decodeKey decodes one base64 key named name and checks it (checkKey).
func decodeKey(name, text string, before [][]byte, nameOf func(int) string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil {
		return nil, fmt.Errorf("%s is not base64 (standard encoding, as base64(1) writes it): %w", name, err)
	}
	return k, checkKey(name, k, before, nameOf)
}

// checkKey checks key k, named name, for its size and against the keys
// before it, which nameOf names by their index.
func checkKey(name string, k []byte, before [][]byte, nameOf func(int) string) error {
	if err := cluster.CheckSecretKey(name, k); err != nil {
		return err
	}
	if j := slices.IndexFunc(before, func(o []byte) bool { return bytes.Equal(o, k) }); j >= 0 {
		return fmt.Errorf("%s: the same key as %s", name, nameOf(j))
	}
	return nil
}

// keyIndex names entry j of secret_keys.
func keyIndex(j int) string { return fmt.Sprintf("secret_keys[%d]", j) }

// NodeSecretKeys returns the node's gossip keys (cluster.Config.SecretKeys):
// the file's secret_keys, or those its secret_keys_file holds, read now,
// one base64 key per line (blank lines and lines starting with # aside),
// or none. The agent calls it again on SIGHUP to rotate them. Its errors
// name the key at fault, by its index or its line, and never quote one.
func (c *Config) NodeSecretKeys() ([][]byte, error) {
	fail := func(field string, line int, err error) error {
		return &Error{Path: c.Path, Line: line, Field: field, Err: err}
	}
	if c.SecretKeysFile == "" {
		// A config from Parse has checked them; one built in code has
		// them checked here.
		if len(c.SecretKeys) > cluster.MaxSecretKeys {
			return nil, fail("secret_keys", 0, fmt.Errorf("secret_keys: %d keys, want at most %d (a rotation needs 2)",
				len(c.SecretKeys), cluster.MaxSecretKeys))
		}
		for i, k := range c.SecretKeys {
			if err := checkKey(keyIndex(i), k, c.SecretKeys[:i], keyIndex); err != nil {
				return nil, fail("secret_keys", 0, err)
			}
		}
		return c.SecretKeys, nil
	}
	if len(c.SecretKeys) > 0 {
		return nil, fail("secret_keys_file", c.secretKeysFileLine, errors.New("secret_keys and secret_keys_file are both set: set one"))
	}
	path := c.SecretKeysFile
	data, err := regularfile.Read(path, MaxKeysFileSize)
	if err != nil {
		return nil, fail("secret_keys_file", c.secretKeysFileLine, fmt.Errorf("secret_keys_file: %w", err))
	}
	var keys [][]byte
	lines := map[int]int{} // index of a key → its line
	for i, text := range strings.Split(string(data), "\n") {
		text = strings.TrimSpace(text)
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		line := i + 1
		if len(keys) == cluster.MaxSecretKeys {
			return nil, fail("secret_keys_file", c.secretKeysFileLine, fmt.Errorf("secret_keys_file %s: more than %d keys (a rotation needs 2)",
				path, cluster.MaxSecretKeys))
		}
		k, err := decodeKey(fmt.Sprintf("secret_keys_file %s:%d", path, line), text, keys,
			func(j int) string { return fmt.Sprintf("line %d", lines[j]) })
		if err != nil {
			return nil, fail("secret_keys_file", c.secretKeysFileLine, err)
		}
		lines[len(keys)] = line
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fail("secret_keys_file", c.secretKeysFileLine,
			fmt.Errorf("secret_keys_file %s holds no keys: write one base64 key per line", path))
	}
	return keys, nil
}
