package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// An API key is "odk_" + a 12-hex-digit key id + "_" + a secret of 32 random
// bytes (base64url). The key file stores the id, the owner and a salted
// SHA-256 of the secret, never the secret. A slow password hash is not
// needed: the secret has 256 bits of entropy, so the hash cannot be
// reversed by guessing, and a fast one costs each call microseconds.
const (
	keyPrefix   = "odk_"
	keyIDLength = 12 // hex digits
)

// KeyFile is the API key file: JSON, written by `orderd keys`.
type KeyFile struct {
	Keys []KeyEntry `json:"keys"`
}

// KeyEntry is one API key as stored: who it is for and a salted hash.
type KeyEntry struct {
	ID          string    `json:"id"`
	Tenant      string    `json:"tenant"`
	Name        string    `json:"name"`
	Permissions []string  `json:"permissions"`
	Salt        string    `json:"salt"` // base64, 16 bytes
	Hash        string    `json:"hash"` // base64 SHA-256(salt || secret)
	CreatedAt   time.Time `json:"created_at"`
}

type storedKey struct {
	id         Identity
	salt, hash []byte
}

// KeyRing verifies API keys against the key file's current contents. Safe
// for concurrent use; Load swaps the whole set at once.
type KeyRing struct {
	keys atomic.Pointer[map[string]storedKey]
}

// ErrBadKey is any API key that does not verify: malformed, unknown id,
// wrong secret or revoked. The caller learns no more than that.
var ErrBadKey = errors.New("api key does not verify")

// Load replaces the ring's keys with those of a key file's contents. On
// error the ring keeps its previous keys.
func (r *KeyRing) Load(data []byte) error {
	var f KeyFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	keys := make(map[string]storedKey, len(f.Keys))
	for i, e := range f.Keys {
		k, err := e.stored()
		if err != nil {
			return fmt.Errorf("key file entry %d (id %q): %w", i, e.ID, err)
		}
		if _, dup := keys[e.ID]; dup {
			return fmt.Errorf("key file: id %q appears twice", e.ID)
		}
		keys[e.ID] = k
	}
	r.keys.Store(&keys)
	return nil
}

// Len is the number of keys loaded.
func (r *KeyRing) Len() int {
	if m := r.keys.Load(); m != nil {
		return len(*m)
	}
	return 0
}

func (e KeyEntry) stored() (storedKey, error) {
	if len(e.ID) != keyIDLength {
		return storedKey{}, fmt.Errorf("id must be %d hex digits", keyIDLength)
	}
	if _, err := hex.DecodeString(e.ID); err != nil {
		return storedKey{}, fmt.Errorf("id must be %d hex digits", keyIDLength)
	}
	if err := ValidTenant(e.Tenant); err != nil {
		return storedKey{}, err
	}
	perms, err := ParsePermissions(e.Permissions)
	if err != nil {
		return storedKey{}, err
	}
	salt, err := base64.StdEncoding.DecodeString(e.Salt)
	if err != nil || len(salt) < 16 {
		return storedKey{}, errors.New("salt must be at least 16 bytes, base64")
	}
	hash, err := base64.StdEncoding.DecodeString(e.Hash)
	if err != nil || len(hash) != sha256.Size {
		return storedKey{}, errors.New("hash must be a base64 SHA-256")
	}
	return storedKey{id: Identity{Tenant: e.Tenant, Name: e.Name, Method: MethodAPIKey, Permissions: perms}, salt: salt, hash: hash}, nil
}

// Verify returns the identity of an API key, or ErrBadKey.
func (r *KeyRing) Verify(key string) (Identity, error) {
	id, secret, ok := splitKey(key)
	if !ok {
		return Identity{}, ErrBadKey
	}
	var keys map[string]storedKey
	if m := r.keys.Load(); m != nil {
		keys = *m
	}
	k, found := keys[id]
	if !found {
		// Hash anyway, so an unknown id costs what a wrong secret does.
		k = storedKey{salt: make([]byte, 16), hash: make([]byte, sha256.Size)}
	}
	sum := hashSecret(k.salt, secret)
	if subtle.ConstantTimeCompare(sum, k.hash) != 1 || !found {
		return Identity{}, ErrBadKey
	}
	return k.id, nil
}

// isAPIKey reports whether a bearer token has the API key form (as opposed
// to a JWT).
func isAPIKey(token string) bool { return strings.HasPrefix(token, keyPrefix) }

func splitKey(key string) (id, secret string, ok bool) {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok || len(rest) < keyIDLength+2 || rest[keyIDLength] != '_' {
		return "", "", false
	}
	return rest[:keyIDLength], rest[keyIDLength+1:], true
}

func hashSecret(salt []byte, secret string) []byte {
	h := sha256.New()
	h.Write(salt)
	h.Write([]byte(secret))
	return h.Sum(nil)
}

// NewKey makes an API key for tenant: the key to hand to the client once,
// and the entry to store.
func NewKey(tenant, name string, perms []string, now time.Time) (key string, entry KeyEntry, err error) {
	if err := ValidTenant(tenant); err != nil {
		return "", KeyEntry{}, err
	}
	p, err := ParsePermissions(perms)
	if err != nil {
		return "", KeyEntry{}, err
	}
	if p == 0 {
		return "", KeyEntry{}, errors.New("a key needs at least one permission (create, read, admin)")
	}
	idBytes, salt, secretBytes := make([]byte, keyIDLength/2), make([]byte, 16), make([]byte, 32)
	for _, b := range [][]byte{idBytes, salt, secretBytes} {
		if _, err := rand.Read(b); err != nil {
			return "", KeyEntry{}, err
		}
	}
	id, secret := hex.EncodeToString(idBytes), base64.RawURLEncoding.EncodeToString(secretBytes)
	entry = KeyEntry{ID: id, Tenant: tenant, Name: name, Permissions: strings.Split(p.String(), ","),
		Salt: base64.StdEncoding.EncodeToString(salt), Hash: base64.StdEncoding.EncodeToString(hashSecret(salt, secret)),
		CreatedAt: now.UTC().Truncate(time.Second)}
	return keyPrefix + id + "_" + secret, entry, nil
}

// ReadKeyFile reads a key file; a missing file is an empty one.
func ReadKeyFile(path string) (KeyFile, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return KeyFile{}, nil
	}
	if err != nil {
		return KeyFile{}, err
	}
	var f KeyFile
	if err := json.Unmarshal(data, &f); err != nil {
		return KeyFile{}, fmt.Errorf("key file %s: %w", path, err)
	}
	return f, nil
}

// WriteKeyFile replaces the key file atomically (a temporary file renamed
// over it), readable by its owner only, so a running orderd never reloads a
// half-written file.
func WriteKeyFile(path string, f KeyFile) error {
	if f.Keys == nil {
		f.Keys = []KeyEntry{}
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing to remove
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
