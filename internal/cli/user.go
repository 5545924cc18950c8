package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/store"
)

func newUserCommand(cfg *config) *cobra.Command {
	cmd := groupCommand("user", "Manage users and API tokens")

	var role string
	var passwordStdin bool
	add := &cobra.Command{
		Use:   "add <username>",
		Short: "Create a user; prints a generated password unless --password-stdin is given",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			password := ""
			if passwordStdin {
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if err != nil && !errors.Is(err, io.EOF) {
					return fmt.Errorf("read password: %w", err)
				}
				password = strings.TrimRight(line, "\r\n")
			} else {
				password = auth.NewPassword()
			}
			return withAuth(cmd, cfg, func(svc *auth.Service) error {
				u, err := svc.AddUser(cmd.Context(), args[0], password, role)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "created %s with role %s\n", u.Username, u.Role)
				if !passwordStdin {
					fmt.Fprintf(cmd.OutOrStdout(), "password: %s\n", password)
				}
				return nil
			})
		},
	}
	add.Flags().StringVar(&role, "role", store.RoleViewer, "viewer, reviewer or admin")
	add.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the password from standard input")

	var passwdStdin bool
	passwd := &cobra.Command{
		Use:   "passwd <username>",
		Short: "Set a user's password (an admin's reset); prints a generated one unless --password-stdin is given. Their sessions end.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			password := auth.NewPassword()
			if passwdStdin {
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if err != nil && !errors.Is(err, io.EOF) {
					return fmt.Errorf("read password: %w", err)
				}
				password = strings.TrimRight(line, "\r\n")
			}
			return withAuth(cmd, cfg, func(svc *auth.Service) error {
				if err := svc.SetPassword(cmd.Context(), args[0], password); err != nil {
					return fmt.Errorf("set the password of %s: %w", args[0], err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "password of %s changed; their sessions are signed out\n", args[0])
				if !passwdStdin {
					fmt.Fprintf(cmd.OutOrStdout(), "password: %s\n", password)
				}
				return nil
			})
		},
	}
	passwd.Flags().BoolVar(&passwdStdin, "password-stdin", false, "read the new password from standard input")

	var tokenName string
	token := &cobra.Command{
		Use:   "token <username>",
		Short: "Issue an API token for a user (shown once; only its hash is stored)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAuth(cmd, cfg, func(svc *auth.Service) error {
				tok, err := svc.CreateToken(cmd.Context(), args[0], tokenName)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), tok)
				return nil
			})
		},
	}
	token.Flags().StringVar(&tokenName, "name", "cli", "a label for the token")

	groups := &cobra.Command{
		Use:   "groups <username> [GROUP,GROUP...]",
		Short: "Set a user's groups (comma separated; none: no group), which a policy rule's group: may require of an interrupt's deciders; without groups, print them",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, cfg, func(st *store.Store) error {
				u, err := st.UserGetByUsername(cmd.Context(), args[0])
				if err != nil {
					return fmt.Errorf("user %q: %w", args[0], err)
				}
				if len(args) == 2 {
					list, err := auth.ParseGroups(args[1])
					if err != nil {
						return err
					}
					if u, err = st.UserUpdate(cmd.Context(), u.ID, store.UserUpdateParams{Groups: &list}); err != nil {
						return err
					}
					if err := st.AuditInsert(cmd.Context(), cliActor(), "user.update", "user", u.Username, map[string]any{"groups": list}); err != nil {
						return err
					}
				}
				list := strings.Join(u.Groups, ", ")
				if list == "" {
					list = "no group"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", u.Username, list)
				return nil
			})
		},
	}
	cmd.AddCommand(add, passwd, token, groups)
	return cmd
}

// withAuth opens the database (migrating it) and runs fn with the auth service.
func withAuth(cmd *cobra.Command, cfg *config, fn func(*auth.Service) error) error {
	return withStore(cmd, cfg, func(st *store.Store) error { return fn(auth.New(st)) })
}
