package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftworks/weft/auth"
)

func newTokenCmd() *cobra.Command {
	var (
		p   auth.Principal
		ttl time.Duration
	)
	cmd := &cobra.Command{
		Use:   "token --tenant T --sub S --scope X [--scope Y] [--ttl 1h]",
		Short: "Print an API token signed with the configured secret",
		Long: `Prints a JWT (HS256) signed with WEFT_JWT_SECRET, or with the secret generated
into WEFT_DATA_DIR by weft dev when the variable is unset, so the token works
against the API of the same environment. Scopes: ` + fmt.Sprint(auth.AllScopes),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			generated := false
			if cfg.JWTSecret == "" {
				_, err := os.Stat(filepath.Join(cfg.DataDir, "jwt-secret"))
				generated = errors.Is(err, os.ErrNotExist)
			}
			if err := cfg.EnsureJWTSecret(); err != nil {
				return err
			}
			if generated {
				fmt.Fprintf(cmd.ErrOrStderr(), "weft: generated a new secret in %s; only a weft using that data dir (or WEFT_JWT_SECRET) accepts this token\n", filepath.Join(cfg.DataDir, "jwt-secret"))
			}
			keys, err := auth.NewKeys(cfg.JWTSecret)
			if err != nil {
				return err
			}
			if p.Tenant == "" || p.Sub == "" {
				return errors.New("--tenant and --sub are required")
			}
			for _, s := range p.Scopes {
				if !slices.Contains(auth.AllScopes, s) {
					fmt.Fprintf(cmd.ErrOrStderr(), "weft: warning: %q is not one of weft's scopes %v\n", s, auth.AllScopes)
				}
			}
			token, err := keys.Mint(p, ttl)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), token)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.Tenant, "tenant", "", "tenant claim (required)")
	f.StringVar(&p.Sub, "sub", "", "subject claim: the user or service id (required)")
	f.StringSliceVar(&p.Scopes, "scope", nil, "scope to grant; repeat or separate with commas")
	f.DurationVar(&ttl, "ttl", time.Hour, "how long the token is valid")
	f.StringVar(&p.Name, "name", "", "optional display name claim")
	f.StringVar(&p.Email, "email", "", "optional email claim")
	f.StringVar(&p.TenantName, "tenant-name", "", "optional tenant display name claim (tenantName)")
	_ = cmd.MarkFlagRequired("tenant")
	_ = cmd.MarkFlagRequired("sub")
	return cmd
}
