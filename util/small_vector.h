// SmallVector<T, N>: a std::vector-like array that holds up to N elements inside itself and goes to the heap
// only past that. It exists for shapes and strides: every tensor view, every op's output shape and every strided
// loop made one or two of them, and as std::vector each was a malloc and a free (about 7 million a second in a
// comparison, most of them for 1 to 5 numbers). T must be trivially copyable: elements move with memcpy and
// are never destroyed.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <type_traits>
#include <vector>

namespace ponder {

template <class T, uint32_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector moves its elements with memcpy");

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallVector() = default;
  explicit SmallVector(size_t n) { resize(n); }
  SmallVector(size_t n, const T& v) { assign(n, v); }
  SmallVector(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  template <class It, class = std::enable_if_t<!std::is_integral_v<It>>>
  SmallVector(It first, It last) { assign(first, last); }
  // Implicit, so that code holding a std::vector (a config's list, a host-side table) passes it as it is.
  SmallVector(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT(google-explicit-constructor)
  SmallVector(const SmallVector& o) { assign(o.begin(), o.end()); }
  SmallVector(SmallVector&& o) noexcept { take(o); }
  ~SmallVector() { release(); }

  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> il) {
    assign(il.begin(), il.end());
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& front() { return data_[0]; }
  const T& front() const { return data_[0]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }
  iterator begin() { return data_; }
  iterator end() { return data_ + size_; }
  const_iterator begin() const { return data_; }
  const_iterator end() const { return data_ + size_; }
  const_iterator cbegin() const { return data_; }
  const_iterator cend() const { return data_ + size_; }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  void reserve(size_t n) {
    if (n <= cap_) return;
    T* p = static_cast<T*>(std::malloc(n * sizeof(T)));
    if (!p) throw std::bad_alloc();
    if (size_) std::memcpy(p, data_, size_ * sizeof(T));
    release();
    data_ = p;
    cap_ = uint32_t(n);
  }
  void clear() { size_ = 0; }
  void resize(size_t n, const T& v = T()) {
    const T copy = v;  // v may live in this array
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = copy;
    size_ = uint32_t(n);
  }
  void assign(size_t n, const T& v) {
    size_ = 0;
    resize(n, v);
  }
  template <class It, class = std::enable_if_t<!std::is_integral_v<It>>>
  void assign(It first, It last) {
    const size_t n = size_t(std::distance(first, last));
    size_ = 0;
    reserve(n);
    std::copy(first, last, data_);
    size_ = uint32_t(n);
  }
  void push_back(const T& v) {
    if (size_ == cap_) grow_keeping(v);
    else data_[size_++] = v;
  }
  template <class... A>
  T& emplace_back(A&&... a) {
    push_back(T(std::forward<A>(a)...));
    return back();
  }
  void pop_back() { --size_; }

  iterator insert(const_iterator pos, const T& v) { return insert(pos, size_t(1), v); }
  iterator insert(const_iterator pos, size_t n, const T& v) {
    const T copy = v;  // v may live in this array
    T* p = open_gap(pos, n);
    std::fill(p, p + n, copy);
    return p;
  }
  template <class It, class = std::enable_if_t<!std::is_integral_v<It>>>
  iterator insert(const_iterator pos, It first, It last) {
    const SmallVector src(first, last);  // the range may lie in this array
    T* p = open_gap(pos, src.size());
    std::copy(src.begin(), src.end(), p);
    return p;
  }
  iterator insert(const_iterator pos, std::initializer_list<T> il) { return insert(pos, il.begin(), il.end()); }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    T* f = data_ + (first - data_);
    const size_t n = size_t(last - first);
    std::memmove(f, f + n, size_t(end() - (f + n)) * sizeof(T));
    size_ -= uint32_t(n);
    return f;
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const SmallVector& a, const SmallVector& b) { return !(a == b); }
  friend bool operator<(const SmallVector& a, const SmallVector& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

 private:
  bool on_heap() const { return data_ != inline_; }
  void release() {
    if (on_heap()) std::free(data_);
    data_ = inline_;
    cap_ = N;
  }
  // Steals o's heap block, or copies its inline elements; o is left empty and inline.
  void take(SmallVector& o) {
    if (o.on_heap()) {
      data_ = o.data_;
      cap_ = o.cap_;
      o.data_ = o.inline_;
      o.cap_ = N;
    } else {
      std::memcpy(inline_, o.inline_, o.size_ * sizeof(T));
    }
    size_ = o.size_;
    o.size_ = 0;
  }
  void grow_keeping(const T& v) {
    const T copy = v;  // v may live in this array
    reserve(size_t(cap_) * 2);
    data_[size_++] = copy;
  }
  // Moves [pos, end) n places right (growing as needed) and returns the gap's start.
  T* open_gap(const_iterator pos, size_t n) {
    const size_t at = size_t(pos - data_);
    if (size_ + n > cap_) reserve(std::max<size_t>(size_ + n, size_t(cap_) * 2));
    std::memmove(data_ + at + n, data_ + at, (size_ - at) * sizeof(T));
    size_ += uint32_t(n);
    return data_ + at;
  }

  T* data_ = inline_;
  uint32_t size_ = 0;
  uint32_t cap_ = N;
  T inline_[N];
};

}  // namespace ponder
