package templates

import (
	"time"
)

// UserRow is one user on the users page.
type UserRow struct {
	ID       string
	Username string
	Role     string
	Disabled bool
	// Groups are the user's groups, comma separated, as the form edits them.
	Groups    string
	CreatedAt time.Time
	Self      bool
}

// UsersPage is the users admin page's view model.
type UsersPage struct {
	Page
	Users      []UserRow
	Roles      []string
	Flash      string
	FlashError bool
	// NewPassword is shown once, after creating a user without a chosen password.
	NewPassword string
}

// AccountPage is a signed-in user's own page: who they are, and the form to change their password.
type AccountPage struct {
	Page
	Username   string
	Role       string
	Local      bool
	Flash      string
	FlashError bool
}
