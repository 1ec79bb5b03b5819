package aibot

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// ErrDecrypt is wrapped by DecryptMedia.
var ErrDecrypt = errors.New("wecom aibot: media decryption failed")

// DecryptMedia decrypts a downloaded resource: AES-256-CBC with the
// resource's base64 aeskey as the key and its first 16 bytes as the IV,
// PKCS#7 padding to 32-byte blocks (as WeCom pads).
func DecryptMedia(data []byte, aesKey string) ([]byte, error) {
	k := strings.TrimRight(strings.TrimSpace(aesKey), "=")
	key, err := base64.RawStdEncoding.DecodeString(k)
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("%w: the aeskey is not 32 bytes of base64", ErrDecrypt)
	}
	if len(data) == 0 || len(data)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of blocks", ErrDecrypt, len(data))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
	}
	out := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, key[:16]).CryptBlocks(out, data)
	pad := int(out[len(out)-1])
	if pad < 1 || pad > 32 || pad > len(out) {
		return nil, fmt.Errorf("%w: bad padding (wrong key?)", ErrDecrypt)
	}
	for _, b := range out[len(out)-pad:] {
		if int(b) != pad {
			return nil, fmt.Errorf("%w: bad padding (wrong key?)", ErrDecrypt)
		}
	}
	return out[:len(out)-pad], nil
}

// EncryptMedia is DecryptMedia's inverse (the test kit serves encrypted
// media with it).
func EncryptMedia(plain []byte, aesKey string) ([]byte, error) {
	key, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(aesKey, "="))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("%w: the aeskey is not 32 bytes of base64", ErrDecrypt)
	}
	pad := 32 - len(plain)%32
	buf := make([]byte, len(plain), len(plain)+pad)
	copy(buf, plain)
	for range pad {
		buf = append(buf, byte(pad))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(buf))
	cipher.NewCBCEncrypter(block, key[:16]).CryptBlocks(out, buf)
	return out, nil
}
