package server

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/web/templates"
)

var allRoles = []string{store.RoleViewer, store.RoleReviewer, store.RoleAdmin}

func (s *Server) usersData(c echo.Context) (templates.UsersPage, error) {
	p := templates.UsersPage{Page: s.page(c, "Users", "users"), Roles: allRoles}
	users, err := s.store.UserList(c.Request().Context())
	if err != nil {
		return p, err
	}
	me := principal(c).Username
	for _, u := range users {
		p.Users = append(p.Users, templates.UserRow{ID: u.ID.String(), Username: u.Username, Role: u.Role, Groups: strings.Join(u.Groups, ", "),
			Disabled: u.Disabled, CreatedAt: u.CreatedAt, Self: u.Username == me})
	}
	return p, nil
}

func (s *Server) usersFlash(c echo.Context, status int, msg string, isErr bool, password string) error {
	p, err := s.usersData(c)
	if err != nil {
		return err
	}
	p.Flash, p.FlashError, p.NewPassword = msg, isErr, password
	// The page may show a password once: no cache may keep it.
	c.Response().Header().Set("Cache-Control", "no-store")
	return s.render(c, status, templates.UsersView(p))
}

// usersPage is GET /users (admin only).
func (s *Server) usersPage(c echo.Context) error {
	return s.usersFlash(c, http.StatusOK, "", false, "")
}

// userCreate is POST /users: a new user, with a generated password unless one is given.
func (s *Server) userCreate(c echo.Context) error {
	username, password, role := strings.TrimSpace(c.FormValue("username")), c.FormValue("password"), c.FormValue("role")
	if username == "" {
		return s.usersFlash(c, http.StatusUnprocessableEntity, "A username is required.", true, "")
	}
	if !auth.ValidRole(role) {
		return s.usersFlash(c, http.StatusUnprocessableEntity, "Unknown role "+role+".", true, "")
	}
	shown := ""
	if password == "" {
		password = auth.NewPassword()
		shown = password
	}
	_, err := auth.New(s.store).AddUser(c.Request().Context(), username, password, role)
	if errors.Is(err, store.ErrConflict) {
		return s.usersFlash(c, http.StatusConflict, "The username "+username+" is taken.", true, "")
	}
	if err != nil {
		return s.usersFlash(c, http.StatusUnprocessableEntity, err.Error(), true, "")
	}
	if err := s.store.AuditInsert(c.Request().Context(), principal(c).Username, "user.create", "user", username, map[string]any{"role": role}); err != nil {
		return err
	}
	return s.usersFlash(c, http.StatusOK, "Added "+username+" as "+role+".", false, shown)
}

// userUpdate is POST /users/{id}: set the role and the disabled flag. Admins cannot demote or
// disable themselves, so that a site is never left without one.
func (s *Server) userUpdate(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	role, disabled := c.FormValue("role"), c.FormValue("disabled") == "true"
	if !auth.ValidRole(role) {
		return s.usersFlash(c, http.StatusUnprocessableEntity, "Unknown role "+role+".", true, "")
	}
	ctx := c.Request().Context()
	users, err := s.store.UserList(ctx)
	if err != nil {
		return err
	}
	var target *store.User
	for _, u := range users {
		if u.ID == id {
			target = u
		}
	}
	if target == nil {
		return Errorf(http.StatusNotFound, "not_found", "user %s not found", id)
	}
	if target.Username == principal(c).Username && (role != store.RoleAdmin || disabled) {
		return s.usersFlash(c, http.StatusUnprocessableEntity, "You cannot demote or disable yourself.", true, "")
	}
	groups, err := auth.ParseGroups(c.FormValue("groups"))
	if err != nil {
		return s.usersFlash(c, http.StatusUnprocessableEntity, "Not saved: "+err.Error(), true, "")
	}
	if _, err := s.store.UserUpdate(ctx, id, store.UserUpdateParams{Role: &role, Disabled: &disabled, Groups: &groups}); err != nil {
		return err
	}
	if err := s.store.AuditInsert(ctx, principal(c).Username, "user.update", "user", target.Username,
		map[string]any{"role": role, "disabled": disabled, "groups": groups}); err != nil {
		return err
	}
	return s.usersFlash(c, http.StatusOK, "Saved "+target.Username+".", false, "")
}

// userResetPassword is POST /users/{id}/password (admin): a new password for another user, the
// one given or a generated one shown once; their sessions end. One's own goes through the
// account page, which asks for the current password.
func (s *Server) userResetPassword(c echo.Context) error {
	id, err := pathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	users, err := s.store.UserList(ctx)
	if err != nil {
		return err
	}
	var target *store.User
	for _, u := range users {
		if u.ID == id {
			target = u
		}
	}
	if target == nil {
		return Errorf(http.StatusNotFound, "not_found", "user %s not found", id)
	}
	if target.Username == principal(c).Username {
		return s.usersFlash(c, http.StatusUnprocessableEntity, "Change your own password on your account page: it asks for the current one.", true, "")
	}
	password, shown := c.FormValue("password"), ""
	if password == "" {
		password = auth.NewPassword()
		shown = password
	}
	if err := s.auth.SetPassword(ctx, target.Username, password); err != nil {
		return s.usersFlash(c, http.StatusUnprocessableEntity, err.Error(), true, "")
	}
	if err := s.store.AuditInsert(ctx, principal(c).Username, "user.password_reset", "user", target.Username, nil); err != nil {
		return err
	}
	return s.usersFlash(c, http.StatusOK, "Reset the password of "+target.Username+"; their sessions are signed out.", false, shown)
}

// accountPage is GET /account: one's own account and the password change.
func (s *Server) accountPage(c echo.Context) error {
	return s.accountFlash(c, http.StatusOK, "", false)
}

func (s *Server) accountFlash(c echo.Context, status int, msg string, isErr bool) error {
	pr := principal(c)
	p := templates.AccountPage{Page: s.page(c, "Your account", ""), Username: pr.Username, Role: pr.Role, Local: pr.Local,
		Flash: msg, FlashError: isErr}
	return s.render(c, status, templates.AccountView(p))
}

// accountPassword is POST /account/password: change one's own password, given the current one.
// The other sessions end; this one stays signed in.
func (s *Server) accountPassword(c echo.Context) error {
	pr := principal(c)
	if pr.Local {
		return s.accountFlash(c, http.StatusUnprocessableEntity, "Local mode has no passwords to change.", true)
	}
	current, next := c.FormValue("current"), c.FormValue("password")
	if next != c.FormValue("confirm") {
		return s.accountFlash(c, http.StatusUnprocessableEntity, "The new password and its repetition differ: nothing was changed.", true)
	}
	keep := ""
	if ck, err := c.Cookie(sessionCookie); err == nil {
		keep = ck.Value
	}
	ctx := c.Request().Context()
	err := s.auth.ChangePassword(ctx, pr.Username, current, next, keep)
	switch {
	case errors.Is(err, auth.ErrBadCredentials):
		return s.accountFlash(c, http.StatusUnprocessableEntity, "The current password is wrong: nothing was changed.", true)
	case errors.Is(err, store.ErrNotFound):
		return s.accountFlash(c, http.StatusUnprocessableEntity, "This sign-in has no password (an API token's user?): nothing was changed.", true)
	case err != nil && strings.HasPrefix(err.Error(), "password must"):
		return s.accountFlash(c, http.StatusUnprocessableEntity, "The new "+err.Error()+": nothing was changed.", true)
	case err != nil:
		return err
	}
	if err := s.store.AuditInsert(ctx, pr.Username, "user.password_change", "user", pr.Username, nil); err != nil {
		return err
	}
	return s.accountFlash(c, http.StatusOK, "Your password is changed; your other sessions are signed out.", false)
}
