package loupe_test

import (
	"fmt"
	"go/ast"
	"go/types"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/packages"
)

// publicPackages are the packages a user's program imports.
var publicPackages = []string{
	"github.com/loupe-dev/loupe",
	"github.com/loupe-dev/loupe/ai",
	"github.com/loupe-dev/loupe/anthropic",
	"github.com/loupe-dev/loupe/devui",
	"github.com/loupe-dev/loupe/mcp",
	"github.com/loupe-dev/loupe/openai",
	"github.com/loupe-dev/loupe/scripted",
}

// TestThePublicAPIDocumentsItself walks the public packages as go doc reads them and fails on
// what would make the API unreadable there, or unusable from another module:
//   - an exported signature (a function's, a method's, a field's, a type's) that names a type of
//     an internal package, which code outside this module cannot name;
//   - an exported type that is an alias of a named type of another package, whose fields and
//     methods go doc then does not show (an alias of a function type, or within the package, is
//     fine);
//   - an exported identifier without a doc comment.
func TestThePublicAPIDocumentsItself(t *testing.T) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, publicPackages...)
	require.NoError(t, err)
	require.Len(t, pkgs, len(publicPackages))
	var problems []string
	for _, p := range pkgs {
		require.Empty(t, p.Errors, "load %s", p.PkgPath)
		problems = append(problems, apiProblems(p)...)
	}
	sort.Strings(problems)
	require.Empty(t, problems, "the public API:\n%s", strings.Join(problems, "\n"))
}

func apiProblems(p *packages.Package) []string {
	var out []string
	report := func(obj types.Object, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s.%s: %s", p.Types.Name(), obj.Name(), fmt.Sprintf(format, args...)))
	}
	scope := p.Types.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		if where := internalIn(obj.Type(), map[types.Type]bool{}); where != "" {
			report(obj, "names %s, which is internal", where)
		}
		if tn, ok := obj.(*types.TypeName); ok {
			if tn.IsAlias() {
				if named, ok := types.Unalias(tn.Type()).(*types.Named); ok && named.Obj().Pkg() != p.Types {
					report(obj, "is an alias of %s: go doc shows none of its fields or methods", named.Obj().Pkg().Path()+"."+named.Obj().Name())
				}
				continue
			}
			named, ok := tn.Type().(*types.Named)
			if !ok {
				continue
			}
			for i := range named.NumMethods() {
				m := named.Method(i)
				if !m.Exported() {
					continue
				}
				if where := internalIn(m.Type(), map[types.Type]bool{}); where != "" {
					report(obj, "its method %s names %s, which is internal", m.Name(), where)
				}
			}
			if st, ok := named.Underlying().(*types.Struct); ok {
				for i := range st.NumFields() {
					f := st.Field(i)
					if f.Exported() {
						if where := internalIn(f.Type(), map[types.Type]bool{}); where != "" {
							report(obj, "its field %s names %s, which is internal", f.Name(), where)
						}
					}
				}
			}
		}
	}
	for _, file := range p.Syntax {
		if strings.HasSuffix(p.Fset.File(file.Pos()).Name(), "_test.go") {
			continue
		}
		for _, d := range file.Decls {
			out = append(out, undocumented(p, d)...)
		}
	}
	return out
}

// internalIn returns the first type of an internal package that t refers to, or "".
func internalIn(t types.Type, seen map[types.Type]bool) string {
	if t == nil || seen[t] {
		return ""
	}
	seen[t] = true
	switch x := t.(type) {
	case *types.Alias:
		return internalIn(types.Unalias(x), seen)
	case *types.Named:
		if pkg := x.Obj().Pkg(); pkg != nil && strings.Contains(pkg.Path(), "/internal/") {
			return pkg.Path() + "." + x.Obj().Name()
		}
		if args := x.TypeArgs(); args != nil {
			for i := range args.Len() {
				if w := internalIn(args.At(i), seen); w != "" {
					return w
				}
			}
		}
		return ""
	case *types.Pointer:
		return internalIn(x.Elem(), seen)
	case *types.Slice:
		return internalIn(x.Elem(), seen)
	case *types.Array:
		return internalIn(x.Elem(), seen)
	case *types.Map:
		if w := internalIn(x.Key(), seen); w != "" {
			return w
		}
		return internalIn(x.Elem(), seen)
	case *types.Chan:
		return internalIn(x.Elem(), seen)
	case *types.Signature:
		for _, tuple := range []*types.Tuple{x.Params(), x.Results()} {
			for i := range tuple.Len() {
				if w := internalIn(tuple.At(i).Type(), seen); w != "" {
					return w
				}
			}
		}
		if r := x.Recv(); r != nil {
			return ""
		}
	case *types.Struct:
		for i := range x.NumFields() {
			if f := x.Field(i); f.Exported() {
				if w := internalIn(f.Type(), seen); w != "" {
					return w
				}
			}
		}
	case *types.Interface:
		for i := range x.NumMethods() {
			if m := x.Method(i); m.Exported() {
				if w := internalIn(m.Type(), seen); w != "" {
					return w
				}
			}
		}
	}
	return ""
}

// undocumented lists the exported identifiers of a declaration that have no doc comment (a
// grouped declaration's comment covers its members, as go doc shows it).
func undocumented(p *packages.Package, d ast.Decl) []string {
	var out []string
	missing := func(name string) { out = append(out, fmt.Sprintf("%s.%s: no doc comment", p.Types.Name(), name)) }
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() || d.Doc != nil {
			return nil
		}
		if d.Recv != nil {
			recv := d.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			if idx, ok := recv.(*ast.IndexExpr); ok {
				recv = idx.X
			}
			if idx, ok := recv.(*ast.IndexListExpr); ok {
				recv = idx.X
			}
			if id, ok := recv.(*ast.Ident); ok && !id.IsExported() {
				return nil
			}
			missing(fmt.Sprint(recv) + "." + d.Name.Name)
			return out
		}
		missing(d.Name.Name)
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() && s.Doc == nil && d.Doc == nil {
					missing(s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() && s.Doc == nil && d.Doc == nil {
						missing(n.Name)
					}
				}
			}
		}
	}
	return out
}
