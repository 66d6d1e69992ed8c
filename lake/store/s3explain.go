package store

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/minio/minio-go/v7"
)

// CredentialSource says where the credentials of c come from, as a user
// can check it: "given" (AccessKey set), "env" ($AWS_ACCESS_KEY_ID),
// "file" (the shared credentials file) or "none" (neither: the request is
// signed by an instance role if the machine has one, else anonymous). It
// names places, never a key.
func (c S3Config) CredentialSource() string {
	switch {
	case c.AccessKey != "":
		return "given"
	case os.Getenv("AWS_ACCESS_KEY_ID") != "" || os.Getenv("AWS_ACCESS_KEY") != "":
		return "env"
	}
	if _, err := os.Stat(sharedCredentialsFile()); err == nil {
		return "file"
	}
	return "none"
}

// sharedCredentialsFile is where minio-go's FileAWSCredentials looks.
func sharedCredentialsFile() string {
	if f := os.Getenv("AWS_SHARED_CREDENTIALS_FILE"); f != "" {
		return f
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".aws", "credentials")
}

// describeCredentials renders CredentialSource for a message.
func (c S3Config) describeCredentials() string {
	switch c.CredentialSource() {
	case "given":
		return "credentials given in the configuration"
	case "env":
		return "credentials from the environment ($AWS_ACCESS_KEY_ID)"
	case "file":
		return fmt.Sprintf("credentials from the shared credentials file %s (profile %s)",
			sharedCredentialsFile(), cmp.Or(os.Getenv("AWS_PROFILE"), "default"))
	}
	return "no credentials found (no $AWS_ACCESS_KEY_ID, no " + sharedCredentialsFile() + "; an instance role if there is one, else an anonymous request)"
}

// describeEndpoint names the endpoint requests went to, without userinfo.
func (c S3Config) describeEndpoint() string {
	host, secure, err := c.endpoint()
	if err != nil {
		return "an invalid endpoint"
	}
	if secure {
		return "https://" + host
	}
	return "http://" + host
}

// authCodes are the S3 error codes that mean the credentials (or their
// absence) are the problem.
var authCodes = map[string]bool{
	"AccessDenied": true, "InvalidAccessKeyId": true, "SignatureDoesNotMatch": true,
	"ExpiredToken": true, "InvalidToken": true, "TokenRefreshRequired": true,
	"AllAccessDisabled": true, "AccountProblem": true, "MissingSecurityHeader": true,
}

// ExplainS3 adds to an S3 refusal (403, AccessDenied, a bad key id or
// signature) which credential source was used and which endpoint answered,
// so a user can tell a missing variable from a wrong endpoint. Other
// errors are returned as they are. It never shows a key or secret.
func (c S3Config) ExplainS3(err error) error {
	if err == nil {
		return nil
	}
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		return err
	}
	if !authCodes[resp.Code] && resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
		return err
	}
	return fmt.Errorf("%w (S3 endpoint %s, %s)", err, c.describeEndpoint(), c.describeCredentials())
}
