/* SPDX-License-Identifier: MIT */
/*
 * delivery: repository_root is matched against --repository-allow and
 * written below it without ever leaving it ('..', symbolic links, long
 * paths). Every test works in a fresh temporary directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "delivery.h"
#include "harness.h"

static char tmp[PATH_MAX];

/* A fresh temporary directory, resolved (the allow list holds realpaths). */
static const char *tmp_new(void)
{
	const char *base = getenv("TMPDIR");
	char *real;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s/profd-test-delivery-XXXXXX",
			     base && *base ? base : P_tmpdir) >= sizeof(tmp) ||
	    !mkdtemp(tmp))
		TEST_FAIL("mkdtemp: %s", strerror(errno));
	real = realpath(tmp, NULL);
	if (!real)
		TEST_FAIL("realpath: %s", strerror(errno));
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s", real) >= sizeof(tmp))
		TEST_FAIL("temporary directory name too long");
	free(real);
	return tmp;
}

static void tmp_remove(void)
{
	char cmd[PATH_MAX + 16];

	/* rm copes with trees deeper than PATH_MAX, which one test builds. */
	if ((size_t)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp) >= sizeof(cmd) || system(cmd) != 0)
		fprintf(stderr, "  warning: could not remove %s\n", tmp);
}

/* <tmp>/<rel>. Rotates over a few buffers: one call may take two. */
static const char *path(const char *rel)
{
	static char p[4][PATH_MAX];
	static unsigned i;
	char *b = p[i++ % 4];

	if ((size_t)snprintf(b, PATH_MAX, "%s/%s", tmp, rel) >= PATH_MAX)
		TEST_FAIL("path too long: %s", rel);
	return b;
}

static void mkdir_ok(const char *p)
{
	if (mkdir(p, 0755) < 0)
		TEST_FAIL("mkdir %s: %s", p, strerror(errno));
}

static bool exists(const char *p)
{
	struct stat st;

	return lstat(p, &st) == 0;
}

/* Names in directory @p, "." and ".." not counted. */
static int entries(const char *p)
{
	DIR *d = opendir(p);
	struct dirent *e;
	int n = 0;

	if (!d)
		TEST_FAIL("opendir %s: %s", p, strerror(errno));
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

static void read_file(const char *p, char *buf, size_t size)
{
	FILE *f = fopen(p, "r");
	size_t n;

	if (!f)
		TEST_FAIL("open %s: %s", p, strerror(errno));
	n = fread(buf, 1, size - 1, f);
	buf[n] = 0;
	fclose(f);
}

/* Allow <tmp>/allowed and return the list. */
static void allow(struct repo_allow *a)
{
	mkdir_ok(path("allowed"));
	*a = (struct repo_allow){0};
	ASSERT_OK(repo_allow_add(a, path("allowed")));
	ASSERT_EQ(a->n, 1);
	ASSERT_STREQ(a->dirs[0], path("allowed"));
}

TEST(repo_allow_add_needs_an_existing_directory_and_resolves_links)
{
	struct repo_allow a = {0};

	tmp_new();
	ASSERT_EQ(repo_allow_add(&a, path("missing")), -ENOENT);
	if (close(open(path("file"), O_CREAT | O_WRONLY, 0644)) < 0)
		TEST_FAIL("create");
	ASSERT_EQ(repo_allow_add(&a, path("file")), -ENOTDIR);
	ASSERT_EQ(a.n, 0);
	/* Allowed through a link: the list holds where it points. */
	mkdir_ok(path("real"));
	if (symlink(path("real"), path("link")) < 0)
		TEST_FAIL("symlink");
	ASSERT_OK(repo_allow_add(&a, path("link")));
	ASSERT_STREQ(a.dirs[0], path("real"));
	repo_allow_free(&a);
	ASSERT_EQ(a.n, 0);
	tmp_remove();
}

TEST(repo_match_inside_gives_the_relative_part)
{
	struct repo_allow a;
	size_t dir = 99;
	char *rel = NULL;

	tmp_new();
	allow(&a);
	ASSERT_EQ(repo_match(&a, path("allowed"), &dir, &rel), 1);
	ASSERT_EQ(dir, 0);
	ASSERT_STREQ(rel, "");
	free(rel);
	ASSERT_EQ(repo_match(&a, path("allowed/"), &dir, &rel), 1);
	ASSERT_STREQ(rel, "");
	free(rel);
	ASSERT_EQ(repo_match(&a, path("allowed//run1/plugins"), &dir, &rel), 1);
	ASSERT_STREQ(rel, "run1/plugins");
	free(rel);
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_match_outside_the_allowed_directories_is_refused)
{
	struct repo_allow a;
	size_t dir = 99;
	char *rel = (char *)"untouched";

	tmp_new();
	allow(&a);
	/* Not below: in-band delivery only, nothing returned. */
	ASSERT_EQ(repo_match(&a, path("other"), &dir, &rel), 0);
	ASSERT_EQ(repo_match(&a, tmp, &dir, &rel), 0);
	/* A sibling that shares the prefix is not inside (component-wise). */
	ASSERT_EQ(repo_match(&a, path("allowed-evil/x"), &dir, &rel), 0);
	ASSERT_EQ(repo_match(&a, path("allowedx"), &dir, &rel), 0);
	/* Relative roots are never matched (against which cwd?). */
	ASSERT_EQ(repo_match(&a, "allowed/x", &dir, &rel), 0);
	ASSERT_EQ(repo_match(&a, "", &dir, &rel), 0);
	ASSERT_EQ(dir, 99);
	ASSERT_STREQ(rel, "untouched");
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_match_refuses_dotdot_and_dot_components)
{
	struct repo_allow a;
	size_t dir;
	char *rel = NULL;

	tmp_new();
	allow(&a);
	ASSERT_EQ(repo_match(&a, path("allowed/.."), &dir, &rel), -EINVAL);
	ASSERT_EQ(repo_match(&a, path("allowed/../other"), &dir, &rel), -EINVAL);
	ASSERT_EQ(repo_match(&a, path("allowed/run/../../other"), &dir, &rel), -EINVAL);
	ASSERT_EQ(repo_match(&a, path("allowed/./run"), &dir, &rel), -EINVAL);
	ASSERT_EQ(repo_match(&a, path("allowed/run\nforged"), &dir, &rel), -EINVAL);
	ASSERT_TRUE(rel == NULL);
	/* Dots inside a name are just a name; a leading dot makes a hidden
	 * name, which profd never creates. */
	ASSERT_EQ(repo_match(&a, path("allowed/run..x/a.b"), &dir, &rel), 1);
	ASSERT_STREQ(rel, "run..x/a.b");
	free(rel);
	rel = NULL;
	ASSERT_EQ(repo_match(&a, path("allowed/..run/x"), &dir, &rel), -EINVAL);
	ASSERT_EQ(repo_match(&a, path("allowed/run/.x"), &dir, &rel), -EINVAL);
	ASSERT_EQ(repo_match(&a, path("allowed/run/\xff\xfe"), &dir, &rel), -EINVAL);
	ASSERT_TRUE(rel == NULL);
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_match_refuses_components_longer_than_name_max)
{
	struct repo_allow a;
	char name[300], root[PATH_MAX + 400];
	size_t dir;
	char *rel = NULL;

	tmp_new();
	allow(&a);
	memset(name, 'n', 256);
	name[256] = 0;
	if ((size_t)snprintf(root, sizeof(root), "%s/allowed/%s", tmp, name) >= sizeof(root))
		TEST_FAIL("root too long");
	ASSERT_EQ(repo_match(&a, root, &dir, &rel), -EINVAL); /* > NAME_MAX */
	name[255] = 0;
	if ((size_t)snprintf(root, sizeof(root), "%s/allowed/%s", tmp, name) >= sizeof(root))
		TEST_FAIL("root too long");
	ASSERT_EQ(repo_match(&a, root, &dir, &rel), 1);
	ASSERT_EQ(strlen(rel), 255);
	free(rel);
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_write_creates_directories_and_the_file)
{
	struct repo_allow a;
	char buf[64];

	tmp_new();
	allow(&a);
	ASSERT_OK(repo_write(a.dirs[0], "run1/plugins/profile", "2026_01_01", "host.xplane.pb", "abc", 3));
	read_file(path("allowed/run1/plugins/profile/2026_01_01/host.xplane.pb"), buf, sizeof(buf));
	ASSERT_STREQ(buf, "abc");
	/* A second write replaces the file whole, and leaves no temporary. */
	ASSERT_OK(repo_write(a.dirs[0], "run1/plugins/profile", "2026_01_01", "host.xplane.pb", "xy", 2));
	read_file(path("allowed/run1/plugins/profile/2026_01_01/host.xplane.pb"), buf, sizeof(buf));
	ASSERT_STREQ(buf, "xy");
	ASSERT_EQ(entries(path("allowed/run1/plugins/profile/2026_01_01")), 1);
	ASSERT_OK(repo_write(a.dirs[0], "", "s", "f", "", 0)); /* rel "" = the directory itself */
	ASSERT_TRUE(exists(path("allowed/s/f")));
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_write_refuses_bad_session_and_file_names)
{
	struct repo_allow a;

	tmp_new();
	allow(&a);
	ASSERT_EQ(repo_write(a.dirs[0], "", "..", "f", "x", 1), -EINVAL);
	ASSERT_EQ(repo_write(a.dirs[0], "", "s/../..", "f", "x", 1), -EINVAL);
	ASSERT_EQ(repo_write(a.dirs[0], "", "s", "../../escaped", "x", 1), -EINVAL);
	ASSERT_EQ(repo_write(a.dirs[0], "", "s", "", "x", 1), -EINVAL);
	ASSERT_TRUE(!exists(path("escaped")));
	ASSERT_TRUE(!exists(path("allowed/s")));
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_write_refuses_a_symlink_planted_on_the_way)
{
	struct repo_allow a;

	tmp_new();
	allow(&a);
	mkdir_ok(path("outside"));
	/* A link inside the allowed directory that leads out of it ... */
	if (symlink(path("outside"), path("allowed/run")) < 0)
		TEST_FAIL("symlink");
	/* ... as a directory on the way, and as the session directory. */
	ASSERT_EQ(repo_write(a.dirs[0], "run/plugins", "s", "f", "x", 1), -ELOOP);
	ASSERT_EQ(repo_write(a.dirs[0], "", "run", "f", "x", 1), -ELOOP);
	ASSERT_TRUE(!exists(path("outside/plugins")));
	ASSERT_TRUE(!exists(path("outside/f")));
	/* A regular file on the way is not a link: reported as such. */
	if (close(open(path("allowed/file"), O_CREAT | O_WRONLY, 0644)) < 0)
		TEST_FAIL("create");
	ASSERT_EQ(repo_write(a.dirs[0], "file", "s", "f", "x", 1), -ENOTDIR);
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_write_refuses_a_link_put_in_place_of_the_renamed_allowed_directory)
{
	struct repo_allow a;

	tmp_new();
	mkdir_ok(path("parent"));
	mkdir_ok(path("parent/allowed"));
	mkdir_ok(path("outside"));
	mkdir_ok(path("outside/allowed"));
	a = (struct repo_allow){0};
	ASSERT_OK(repo_allow_add(&a, path("parent/allowed")));
	/* The allowed directory renamed, a link to outside in its place. */
	if (rename(path("parent/allowed"), path("parent/moved")) < 0 ||
	    symlink(path("outside/allowed"), path("parent/allowed")) < 0)
		TEST_FAIL("swap: %s", strerror(errno));
	ASSERT_EQ(repo_write(a.dirs[0], "run", "s", "f", "x", 1), -ELOOP);
	/* Its parent renamed, a link in the parent's place. */
	if (unlink(path("parent/allowed")) < 0 || rename(path("parent/moved"), path("parent/allowed")) < 0 ||
	    rename(path("parent"), path("parent2")) < 0 || symlink(path("outside"), path("parent")) < 0)
		TEST_FAIL("swap: %s", strerror(errno));
	ASSERT_EQ(repo_write(a.dirs[0], "run", "s", "f", "x", 1), -ELOOP);
	ASSERT_EQ(entries(path("outside/allowed")), 0);
	ASSERT_EQ(entries(path("parent2/allowed")), 0);
	/* A real directory made again at the allowed path is written to. */
	if (unlink(path("parent")) < 0)
		TEST_FAIL("unlink");
	mkdir_ok(path("parent"));
	mkdir_ok(path("parent/allowed"));
	ASSERT_OK(repo_write(a.dirs[0], "run", "s", "f", "x", 1));
	ASSERT_TRUE(exists(path("parent/allowed/run/s/f")));
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_write_replaces_a_planted_link_at_the_file_name_without_following_it)
{
	struct repo_allow a;
	char buf[16];

	tmp_new();
	allow(&a);
	mkdir_ok(path("allowed/s"));
	if (close(open(path("victim"), O_CREAT | O_WRONLY, 0644)) < 0)
		TEST_FAIL("create");
	if (symlink(path("victim"), path("allowed/s/f")) < 0)
		TEST_FAIL("symlink");
	/* rename() replaces the link itself; the target stays empty. */
	ASSERT_OK(repo_write(a.dirs[0], "", "s", "f", "data", 4));
	read_file(path("victim"), buf, sizeof(buf));
	ASSERT_STREQ(buf, "");
	read_file(path("allowed/s/f"), buf, sizeof(buf));
	ASSERT_STREQ(buf, "data");
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_write_walks_paths_longer_than_path_max)
{
	struct repo_allow a;
	char rel[PATH_MAX + 1024], name[201];
	size_t n = 0;
	int fd;

	tmp_new();
	allow(&a);
	memset(name, 'd', 200);
	name[200] = 0;
	/* 25 components of 200 bytes: longer than PATH_MAX, each one fine. */
	for (int i = 0; i < 25; i++)
		n += (size_t)snprintf(rel + n, sizeof(rel) - n, "%s%s", i ? "/" : "", name);
	ASSERT_TRUE(n > PATH_MAX);
	ASSERT_OK(repo_write(a.dirs[0], rel, "s", "f", "deep", 4));
	/* Check it through the same openat() walk (open() would fail with
	 * ENAMETOOLONG on the whole path). */
	fd = open(a.dirs[0], O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < 25 && fd >= 0; i++) {
		int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);

		close(fd);
		fd = next;
	}
	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(faccessat(fd, "s/f", F_OK, 0));
	close(fd);
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_name_ok_refuses_hidden_dot_names_and_invalid_utf8)
{
	/* What TF clients send stays valid ("localhost:6009" names
	 * "localhost_6009.xplane.pb"; session ids are timestamps). */
	ASSERT_TRUE(repo_name_ok("localhost_6009.xplane.pb"));
	ASSERT_TRUE(repo_name_ok("localhost:6009"));
	ASSERT_TRUE(repo_name_ok("[__1]_6009.xplane.pb"));
	ASSERT_TRUE(repo_name_ok("2026_08_21_17_15_10"));
	ASSERT_TRUE(repo_name_ok("n\xc3\xb6" "de-\xe2\x82\xac")); /* UTF-8 is fine */
	ASSERT_TRUE(repo_name_ok("a..b"));
	ASSERT_TRUE(!repo_name_ok(""));
	ASSERT_TRUE(!repo_name_ok("."));
	ASSERT_TRUE(!repo_name_ok(".."));
	ASSERT_TRUE(!repo_name_ok("...xplane.pb")); /* host_name ".." */
	ASSERT_TRUE(!repo_name_ok(".hidden"));
	ASSERT_TRUE(!repo_name_ok("a/b"));
	ASSERT_TRUE(!repo_name_ok("a\nb"));
	ASSERT_TRUE(!repo_name_ok("a\x7f"));
	ASSERT_TRUE(!repo_name_ok("\xff\xfe"));
	ASSERT_TRUE(!repo_name_ok("\xc0\xaf"));         /* overlong '/' */
	ASSERT_TRUE(!repo_name_ok("\xed\xa0\x80"));     /* surrogate */
	ASSERT_TRUE(!repo_name_ok("caf\xc3"));           /* cut sequence */
}

TEST(repo_match_bounds_depth_and_length)
{
	struct repo_allow a;
	char root[PATH_MAX * 2];
	size_t dir, n;
	char *rel = NULL;

	tmp_new();
	allow(&a);
	/* The default: 32 levels below the allowed directory. */
	n = (size_t)snprintf(root, sizeof(root), "%s/allowed", tmp);
	for (int i = 0; i < REPO_MAX_DEPTH_DEFAULT; i++)
		n += (size_t)snprintf(root + n, sizeof(root) - n, "/d");
	ASSERT_EQ(repo_match(&a, root, &dir, &rel), 1);
	free(rel);
	rel = NULL;
	snprintf(root + n, sizeof(root) - n, "/d");
	ASSERT_EQ(repo_match(&a, root, &dir, &rel), -E2BIG);
	ASSERT_TRUE(rel == NULL);
	/* A bad name deeper down is still reported as such. */
	snprintf(root + n, sizeof(root) - n, "/d/..");
	ASSERT_EQ(repo_match(&a, root, &dir, &rel), -EINVAL);
	/* --repository-max-depth */
	a.max_depth = 2;
	ASSERT_EQ(repo_match(&a, path("allowed/a/b"), &dir, &rel), 1);
	free(rel);
	rel = NULL;
	ASSERT_EQ(repo_match(&a, path("allowed/a/b/c"), &dir, &rel), -E2BIG);
	/* PATH_MAX or longer is refused before anything is copied. */
	a.max_depth = REPO_MAX_DEPTH_LIMIT;
	n = (size_t)snprintf(root, sizeof(root), "%s/allowed", tmp);
	while (n < PATH_MAX)
		n += (size_t)snprintf(root + n, sizeof(root) - n, "/dd");
	ASSERT_EQ(repo_match(&a, root, &dir, &rel), -ENAMETOOLONG);
	ASSERT_TRUE(rel == NULL);
	/* The whole file path is bounded too. */
	ASSERT_OK(repo_path_fits(a.dirs[0], "a/b", "s", "f"));
	memset(root, 'x', PATH_MAX);
	root[PATH_MAX - 20] = 0;
	ASSERT_EQ(repo_path_fits(a.dirs[0], root, "s", "f"), -ENAMETOOLONG);
	repo_allow_free(&a);
	tmp_remove();
}

TEST(repo_write_failure_leaves_no_directory_and_no_temporary_file)
{
	struct repo_allow a;
	struct rlimit old, small = {.rlim_cur = 4, .rlim_max = 0};
	void (*old_sig)(int);
	char data[4096];
	int r;

	tmp_new();
	allow(&a);
	mkdir_ok(path("allowed/run"));
	memset(data, 'x', sizeof(data));
	/* Fail the write itself, after the directories and the temporary
	 * file were made: files may not grow past 4 bytes (EFBIG). */
	if (getrlimit(RLIMIT_FSIZE, &old) < 0)
		TEST_FAIL("getrlimit");
	small.rlim_max = old.rlim_max;
	old_sig = signal(SIGXFSZ, SIG_IGN);
	if (setrlimit(RLIMIT_FSIZE, &small) < 0)
		TEST_FAIL("setrlimit");
	r = repo_write(a.dirs[0], "run/new1/new2", "sess", "host_1.xplane.pb", data, sizeof(data));
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, old_sig);
	ASSERT_EQ(r, -EFBIG);
	/* What it made is gone; what was there before stays. */
	ASSERT_TRUE(exists(path("allowed/run")));
	ASSERT_EQ(entries(path("allowed/run")), 0);
	/* A file where a directory is expected: nothing made, nothing left. */
	if (close(open(path("allowed/run/file"), O_CREAT | O_WRONLY, 0644)) < 0)
		TEST_FAIL("create");
	ASSERT_EQ(repo_write(a.dirs[0], "run/file/x", "s", "f", "x", 1), -ENOTDIR);
	ASSERT_EQ(entries(path("allowed/run")), 1);
	/* A directory in place of the file: the rename fails after the
	 * session directory was made; the temporary file goes, and the
	 * directories that hold something not ours stay. */
	mkdir_ok(path("allowed/run/s2"));
	mkdir_ok(path("allowed/run/s2/f"));
	mkdir_ok(path("allowed/run/s2/f/keep"));
	ASSERT_EQ(repo_write(a.dirs[0], "run", "s2", "f", "x", 1), -EISDIR);
	ASSERT_EQ(entries(path("allowed/run/s2")), 1);
	repo_allow_free(&a);
	tmp_remove();
}

TEST_MAIN()
